// blocking suite, competitor go-goroutine: each client a goroutine with its own connection
// (default GOMAXPROCS), looping one operation until the case stops; the contract is the
// suite's (bench/peers/rust/blocking/src/harness.rs): the same cases, clients, statements,
// payloads, start (every client connected first), warm-up and window, and the same JSON lines.
//
//   - pg_select1_N / pg_sleep_N: a pgx.Conn per goroutine (pgx v5, its default statement
//     cache: the statement is prepared once, then one round trip a query), `SELECT 1` (the
//     answer checked) or `SELECT pg_sleep(0.01)`;
//   - redis_N: one go-redis v9 client with a pool of N connections, SET bench:<i> <64-byte
//     value> then GET bench:<i>, checked (two operations);
//   - http_N: one net/http client whose transport keeps N idle connections to the host,
//     GET / with the body read and checked.
//
// Servers: BLOCKING_PG_URL, BLOCKING_REDIS_URL, BLOCKING_HTTP_URL (a kind whose server is
// not given is left out). CPU: getrusage(RUSAGE_SELF) user+system over the window. A case
// that fails prints {"suite","case","competitor","error"} and the next case runs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

const (
	redisValue = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	hello      = "Hello, World!"
	competitor = "go-goroutine"
)

type kind struct {
	prefix, env, rate, unit, cpu string
}

var kinds = []kind{
	{"pg_select1", "BLOCKING_PG_URL", "queries_per_s", "queries/s", "cpu_us_per_query"},
	{"pg_sleep", "BLOCKING_PG_URL", "queries_per_s", "queries/s", "cpu_us_per_query"},
	{"redis", "BLOCKING_REDIS_URL", "ops_per_s", "ops/s", "cpu_us_per_op"},
	{"http", "BLOCKING_HTTP_URL", "req_per_s", "req/s", "cpu_us_per_req"},
}

type shared struct {
	start     chan struct{} // closed once every client has connected (or the case failed)
	startOnce sync.Once
	done      atomic.Uint64
	connected atomic.Int64
	stop      atomic.Bool
	mu        sync.Mutex
	failure   error
}

func (s *shared) fail(err error) {
	s.mu.Lock()
	if s.failure == nil {
		s.failure = err
	}
	s.mu.Unlock()
	s.stop.Store(true)
	s.open()
}

// open starts the clients' loops.
func (s *shared) open() { s.startOnce.Do(func() { close(s.start) }) }

// connectedAndStarted counts a client connected and waits for every other one.
func (s *shared) connectedAndStarted() {
	s.connected.Add(1)
	<-s.start
}

func (s *shared) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure
}

func cpuMicros() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	us := func(tv syscall.Timeval) float64 { return float64(tv.Sec)*1e6 + float64(tv.Usec) }
	return us(ru.Utime) + us(ru.Stime)
}

// clientFunc connects, reports itself connected, and loops until the case stops.
type clientFunc func(i int, s *shared) error

func pgClient(url, sql string, check bool) clientFunc {
	return func(i int, s *shared) error {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Prepare(ctx, sql, sql); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		s.connectedAndStarted()
		for !s.stop.Load() {
			if check {
				var one int32
				if err := conn.QueryRow(ctx, sql).Scan(&one); err != nil {
					return fmt.Errorf("%s: %w", sql, err)
				}
				if one != 1 {
					return errors.New("SELECT 1 did not answer 1")
				}
			} else if _, err := conn.Exec(ctx, sql); err != nil {
				return fmt.Errorf("%s: %w", sql, err)
			}
			s.done.Add(1)
		}
		return nil
	}
}

func redisClient(rdb *redis.Client) clientFunc {
	return func(i int, s *shared) error {
		ctx := context.Background()
		key := fmt.Sprintf("bench:%d", i)
		if err := rdb.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		s.connectedAndStarted()
		for !s.stop.Load() {
			if err := rdb.Set(ctx, key, redisValue, 0).Err(); err != nil {
				return fmt.Errorf("SET: %w", err)
			}
			back, err := rdb.Get(ctx, key).Result()
			if err != nil {
				return fmt.Errorf("GET: %w", err)
			}
			if back != redisValue {
				return errors.New("GET did not answer the value SET stored")
			}
			s.done.Add(2)
		}
		return nil
	}
}

func httpClient(client *http.Client, url string) clientFunc {
	get := func() error {
		res, err := client.Get(url)
		if err != nil {
			return fmt.Errorf("GET: %w", err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			return fmt.Errorf("body: %w", err)
		}
		if string(body) != hello {
			return fmt.Errorf("GET / answered %q", body)
		}
		return nil
	}
	return func(i int, s *shared) error {
		if err := get(); err != nil {
			return err
		}
		s.connectedAndStarted()
		for !s.stop.Load() {
			if err := get(); err != nil {
				return err
			}
			s.done.Add(1)
		}
		return nil
	}
}

type measured struct{ perS, cpuPerOp float64 }

func runCase(clients int, warmup, window time.Duration, client clientFunc) (measured, error) {
	s := &shared{start: make(chan struct{})}
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := client(i, s); err != nil {
				s.fail(err)
			}
		}(i)
	}
	defer wg.Wait()
	defer s.open()
	defer s.stop.Store(true)
	deadline := time.Now().Add(120 * time.Second)
	for s.connected.Load() < int64(clients) {
		if err := s.failed(); err != nil {
			return measured{}, err
		}
		if time.Now().After(deadline) {
			return measured{}, fmt.Errorf("only %d of %d clients connected", s.connected.Load(), clients)
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.open()
	time.Sleep(warmup)
	start, cpu0, before := time.Now(), cpuMicros(), s.done.Load()
	time.Sleep(window)
	end, cpu1, after := time.Now(), cpuMicros(), s.done.Load()
	s.stop.Store(true)
	if err := s.failed(); err != nil {
		return measured{}, err
	}
	ops := after - before
	if ops == 0 {
		return measured{}, errors.New("no operation completed in the measurement window")
	}
	return measured{float64(ops) / end.Sub(start).Seconds(), (cpu1 - cpu0) / float64(ops)}, nil
}

func main() {
	quick := flag.Bool("quick", false, "one client per case, short windows")
	only := flag.String("case", "", "run only this case")
	flag.Parse()
	counts := []int{1, 64, 1000}
	warmup, window := 500*time.Millisecond, 2*time.Second
	if *quick {
		counts = []int{1}
		warmup, window = 200*time.Millisecond, 500*time.Millisecond
	}
	ran := 0
	for _, k := range kinds {
		url := os.Getenv(k.env)
		if url == "" {
			continue
		}
		for _, n := range counts {
			name := fmt.Sprintf("%s_%d", k.prefix, n)
			if *only != "" && *only != name {
				continue
			}
			ran++
			var client clientFunc
			var closeFn func()
			switch k.prefix {
			case "pg_select1":
				client = pgClient(url, "SELECT 1", true)
			case "pg_sleep":
				client = pgClient(url, "SELECT pg_sleep(0.01)", false)
			case "redis":
				opts, err := redis.ParseURL(url)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				opts.PoolSize, opts.MinIdleConns = n, n
				rdb := redis.NewClient(opts)
				client, closeFn = redisClient(rdb), func() { rdb.Close() }
			case "http":
				transport := &http.Transport{MaxIdleConns: n, MaxIdleConnsPerHost: n}
				client, closeFn = httpClient(&http.Client{Transport: transport}, url), transport.CloseIdleConnections
			}
			m, err := runCase(n, warmup, window, client)
			if closeFn != nil {
				closeFn()
			}
			if err != nil {
				msg := strings.ReplaceAll(strings.ReplaceAll(err.Error(), `\`, `\\`), `"`, `\"`)
				fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
				fmt.Printf("{\"suite\":\"blocking\",\"case\":\"%s\",\"competitor\":\"%s\",\"error\":\"%s\"}\n", name, competitor, msg)
				continue
			}
			fmt.Printf("{\"suite\":\"blocking\",\"case\":\"%s\",\"competitor\":\"%s\",\"metric\":\"%s\",\"value\":%.3f,\"unit\":\"%s\"}\n", name, competitor, k.rate, m.perS, k.unit)
			fmt.Printf("{\"suite\":\"blocking\",\"case\":\"%s\",\"competitor\":\"%s\",\"metric\":\"%s\",\"value\":%.3f,\"unit\":\"us\"}\n", name, competitor, k.cpu, m.cpuPerOp)
		}
	}
	if ran == 0 {
		fmt.Fprintln(os.Stderr, "no server given: set BLOCKING_PG_URL, BLOCKING_REDIS_URL or BLOCKING_HTTP_URL")
		os.Exit(2)
	}
}
