// http suite, competitor go-nethttp: net/http's server, one goroutine per connection,
// keep-alive, answering every request with 200 OK, Content-Type: text/plain, "Hello, World!".
//
// Environment: PORT (listens on 127.0.0.1:$PORT), WORKERS (GOMAXPROCS). SIGTERM's default
// action ends the process.
package main

import (
	"log"
	"net/http"
	"os"
	"runtime"
	"strconv"
)

var body = []byte("Hello, World!")

func hello(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	w.Write(body)
}

func main() {
	if n, err := strconv.Atoi(os.Getenv("WORKERS")); err == nil && n > 0 {
		runtime.GOMAXPROCS(n)
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	http.HandleFunc("/", hello)
	log.Fatal(http.ListenAndServe("127.0.0.1:"+port, nil))
}
