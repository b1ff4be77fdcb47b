// tcp suite, competitor go-goroutine: the net package and goroutines, default GOMAXPROCS.
//
//	bind            net.Listen("tcp", "127.0.0.1:0") then Close, sequentially
//	bind_concurrent the same from 100 goroutines, each doing 1/100 of the ops
//	accept_connect  one listener; an accept goroutine accepts and closes each connection;
//	                per op the client dials, reads EOF, closes
//	pingpong        one connection (TCP_NODELAY), echo goroutine, 64-byte round trips
//	idle_conns      N connections, each server end held by its own goroutine blocked in Read
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	msgSize   = 64
	concUnits = 100
	fdReserve = 100
)

type record struct {
	Suite      string  `json:"suite"`
	Case       string  `json:"case"`
	Competitor string  `json:"competitor"`
	Metric     string  `json:"metric"`
	Value      float64 `json:"value"`
	Unit       string  `json:"unit"`
}

func emit(cas, metric string, value float64, unit string) {
	line, _ := json.Marshal(record{"tcp", cas, "go-goroutine", metric, value, unit})
	fmt.Println(string(line))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "tcp:", err)
		os.Exit(1)
	}
}

func bindLoop(n int) {
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		check(err)
		check(ln.Close())
	}
}

func caseBind(warm, n int) {
	bindLoop(warm)
	t0 := time.Now()
	bindLoop(n)
	emit("bind", "ns_per_op", float64(time.Since(t0).Nanoseconds())/float64(n), "ns")
}

func bindConcurrent(total int) {
	var wg sync.WaitGroup
	for u := 0; u < concUnits; u++ {
		wg.Go(func() { bindLoop(total / concUnits) })
	}
	wg.Wait()
}

func caseBindConcurrent(warm, n int) {
	n = n / concUnits * concUnits
	bindConcurrent(warm)
	t0 := time.Now()
	bindConcurrent(n)
	emit("bind_concurrent", "ns_per_op", float64(time.Since(t0).Nanoseconds())/float64(n), "ns")
}

func caseAcceptConnect(warm, n int) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	addr := ln.Addr().String()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	var b [1]byte
	loop := func(n int) {
		for i := 0; i < n; i++ {
			c, err := net.Dial("tcp", addr)
			check(err)
			if k, err := c.Read(b[:]); k != 0 || err != io.EOF {
				check(fmt.Errorf("expected EOF, got %d bytes, %v", k, err))
			}
			c.Close()
		}
	}
	loop(warm)
	t0 := time.Now()
	loop(n)
	emit("accept_connect", "ns_per_op", float64(time.Since(t0).Nanoseconds())/float64(n), "ns")
	ln.Close()
}

func casePingpong(warm, n int) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	go func() {
		c, err := ln.Accept()
		check(err)
		c.(*net.TCPConn).SetNoDelay(true)
		buf := make([]byte, msgSize)
		for {
			if _, err := io.ReadFull(c, buf); err != nil {
				c.Close()
				return
			}
			if _, err := c.Write(buf); err != nil {
				c.Close()
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	check(err)
	check(c.(*net.TCPConn).SetNoDelay(true))
	msg := []byte(strings.Repeat("0123456789abcdef", msgSize/16))
	buf := make([]byte, msgSize)
	loop := func(n int) {
		for i := 0; i < n; i++ {
			_, err := c.Write(msg)
			check(err)
			_, err = io.ReadFull(c, buf)
			check(err)
		}
	}
	loop(warm)
	t0 := time.Now()
	loop(n)
	emit("pingpong", "ns_per_op", float64(time.Since(t0).Nanoseconds())/float64(n), "ns")
	c.Close()
	ln.Close()
}

func rss() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	check(err)
	f := strings.Fields(string(data))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	check(err)
	return pages * int64(os.Getpagesize())
}

var fdLimit int64

func caseIdleConns(want int) {
	n := want
	if int64(2*n+fdReserve) > fdLimit {
		n = int((fdLimit - fdReserve) / 2)
		fmt.Fprintf(os.Stderr, "idle_conns: RLIMIT_NOFILE is %d, using %d connections instead of %d\n", fdLimit, n, want)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	addr := ln.Addr().String()
	ready := make(chan struct{}, 256)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				var buf [msgSize]byte
				ready <- struct{}{}
				c.Read(buf[:])
				c.Close()
			}()
		}
	}()
	time.Sleep(10 * time.Millisecond)
	before := rss()
	clients := make([]net.Conn, 0, n)
	const batch = 100
	for len(clients) < n {
		k := min(batch, n-len(clients))
		for i := 0; i < k; i++ {
			c, err := net.Dial("tcp", addr)
			check(err)
			clients = append(clients, c)
		}
		for i := 0; i < k; i++ {
			<-ready
		}
	}
	time.Sleep(100 * time.Millisecond) // every server goroutine is parked in Read
	after := rss()
	emit("idle_conns", "bytes_per_conn", float64(after-before)/float64(n), "bytes")
	for _, c := range clients {
		c.Close()
	}
	ln.Close()
}

func main() {
	quick := flag.Bool("quick", false, "small counts")
	only := flag.String("case", "", "run only this case")
	flag.Parse()

	var rl syscall.Rlimit
	check(syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl))
	rl.Cur = rl.Max
	check(syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl))
	fdLimit = int64(rl.Cur)

	q := func(small, full int) int {
		if *quick {
			return small
		}
		return full
	}
	want := func(name string) bool { return *only == "" || *only == name }
	// idle_conns first, so that its resident-set baseline is the fresh process.
	if want("idle_conns") {
		caseIdleConns(q(1000, 10000))
	}
	if want("bind") {
		caseBind(q(100, 1000), q(2000, 20000))
	}
	if want("bind_concurrent") {
		caseBindConcurrent(q(1000, 2000), q(2000, 20000))
	}
	if want("accept_connect") {
		caseAcceptConnect(q(50, 500), q(500, 5000))
	}
	if want("pingpong") {
		casePingpong(q(100, 1000), q(2000, 20000))
	}
}
