// Command rpc is the Go peer of the tournament's rpc suite: the Bench service of
// bench/peers/proto/bench.proto, called through one of two channels:
//
//	-competitor grpchan      github.com/fullstorydev/grpchan/inprocgrpc.Channel (in process)
//	-competitor grpc-go-tcp  grpc-go server on 127.0.0.1:0, grpc-go client over loopback
//
// It prints one JSON line per measurement (see bench/peers/README.md). Throughput cases
// calibrate their op count from a warm-up, then time exactly N ops and count allocations
// with runtime.MemStats around the loop, as testing.Benchmark does (the counts include the
// server side, which runs in this process too). GOMAXPROCS is left at its default.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/fullstorydev/grpchan/inprocgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "rpcpeer/benchpb"
)

const suite = "rpc"

// benchServer implements the Bench service.
type benchServer struct {
	pb.UnimplementedBenchServer
}

func (benchServer) Unary(_ context.Context, in *pb.Payload) (*pb.Payload, error) {
	return in, nil
}

func (benchServer) ServerStream(req *pb.StreamRequest, stream grpc.ServerStreamingServer[pb.Payload]) error {
	// Both channels copy (inprocgrpc) or marshal (grpc-go) the message inside Send, so one
	// message can be sent again and again.
	msg := &pb.Payload{Data: make([]byte, req.GetSize())}
	for i := uint32(0); i < req.GetCount(); i++ {
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
	return nil
}

func (benchServer) Bidi(stream grpc.BidiStreamingServer[pb.Payload, pb.Payload]) error {
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
}

// connect returns a client of the chosen competitor and a function that tears it down.
func connect(competitor string) (pb.BenchClient, func(), error) {
	switch competitor {
	case "grpchan":
		ch := &inprocgrpc.Channel{}
		pb.RegisterBenchServer(ch, benchServer{})
		return pb.NewBenchClient(ch), func() {}, nil
	case "grpc-go-tcp":
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		srv := grpc.NewServer()
		pb.RegisterBenchServer(srv, benchServer{})
		go srv.Serve(lis)
		conn, err := grpc.NewClient(lis.Addr().String(),
			grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			srv.Stop()
			return nil, nil, err
		}
		return pb.NewBenchClient(conn), func() { conn.Close(); srv.Stop() }, nil
	}
	return nil, nil, fmt.Errorf("unknown competitor %q (want grpchan or grpc-go-tcp)", competitor)
}

type config struct {
	target     time.Duration // measured time per throughput case
	warmup     time.Duration // warm-up (and calibration) time per case
	minOps     int           // at least this many measured ops
	latPerG    int           // latency case: calls per goroutine
	latWorkers int
}

var (
	competitor string
	cfg        config
	enc        = json.NewEncoder(os.Stdout)
)

func emit(cs, metric string, value float64, unit string) {
	err := enc.Encode(map[string]any{
		"suite": suite, "case": cs, "competitor": competitor,
		"metric": metric, "value": value, "unit": unit,
	})
	if err != nil {
		panic(err)
	}
}

// op runs n operations split over g goroutines (g == 1: in the calling goroutine).
type op func(n, g int) error

// split runs body(count) in g goroutines that together make n calls, from a common start.
func split(n, g int, body func(count int) error) error {
	if g == 1 {
		return body(n)
	}
	var wg sync.WaitGroup
	errs := make(chan error, g)
	for i := 0; i < g; i++ {
		count := n / g
		if i < n%g {
			count++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := body(count); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// measure warms up for cfg.warmup, sizes N for cfg.target from the warm-up's rate, then runs
// exactly N ops (over g goroutines) and reports ns, bytes and allocs per op.
func measure(cs string, g int, run op) error {
	// Warm-up doubling until cfg.warmup has passed; also the calibration.
	n, done := g, 0
	var spent time.Duration
	for spent < cfg.warmup {
		start := time.Now()
		if err := run(n, g); err != nil {
			return fmt.Errorf("%s warm-up: %w", cs, err)
		}
		spent += time.Since(start)
		done += n
		n *= 2
	}
	perOp := float64(spent) / float64(done)
	n = int(math.Max(float64(cfg.minOps), float64(cfg.target)/perOp))
	n = (n + g - 1) / g * g

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	if err := run(n, g); err != nil {
		return fmt.Errorf("%s: %w", cs, err)
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)

	emit(cs, "ns_per_op", float64(elapsed.Nanoseconds())/float64(n), "ns")
	emit(cs, "bytes_per_op", float64(after.TotalAlloc-before.TotalAlloc)/float64(n), "bytes")
	emit(cs, "allocs_per_op", float64(after.Mallocs-before.Mallocs)/float64(n), "allocs")
	fmt.Fprintf(os.Stderr, "# %s: %d ops in %v\n", cs, n, elapsed)
	return nil
}

func payload(size int) *pb.Payload {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i)
	}
	return &pb.Payload{Data: data}
}

func unary(client pb.BenchClient, size int) op {
	req := payload(size)
	return func(n, g int) error {
		return split(n, g, func(count int) error {
			ctx := context.Background()
			for i := 0; i < count; i++ {
				resp, err := client.Unary(ctx, req)
				if err != nil {
					return err
				}
				if len(resp.Data) != size {
					return fmt.Errorf("echo of %d bytes came back with %d", size, len(resp.Data))
				}
			}
			return nil
		})
	}
}

func serverStream(client pb.BenchClient, count, size uint32) op {
	req := &pb.StreamRequest{Count: count, Size: size}
	return func(n, _ int) error {
		ctx := context.Background()
		for i := 0; i < n; i++ {
			stream, err := client.ServerStream(ctx, req)
			if err != nil {
				return err
			}
			got := uint32(0)
			for {
				msg, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return err
				}
				if uint32(len(msg.Data)) != size {
					return fmt.Errorf("stream message of %d bytes, want %d", len(msg.Data), size)
				}
				got++
			}
			if got != count {
				return fmt.Errorf("stream gave %d messages, want %d", got, count)
			}
		}
		return nil
	}
}

// bidi opens one stream for the whole case and echoes a message per op.
func bidi(client pb.BenchClient) (op, func() error, error) {
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := client.Bidi(ctx)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	req := payload(32)
	run := func(n, _ int) error {
		for i := 0; i < n; i++ {
			if err := stream.Send(req); err != nil {
				return err
			}
			resp, err := stream.Recv()
			if err != nil {
				return err
			}
			if len(resp.Data) != 32 {
				return fmt.Errorf("bidi echo of %d bytes", len(resp.Data))
			}
		}
		return nil
	}
	closeFn := func() error {
		defer cancel()
		if err := stream.CloseSend(); err != nil {
			return err
		}
		if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
			return fmt.Errorf("bidi close: %v", err)
		}
		return nil
	}
	return run, closeFn, nil
}

func latency(client pb.BenchClient) error {
	const cs = "latency"
	workers, per := cfg.latWorkers, cfg.latPerG
	warm := unary(client, 32)
	if err := warm(workers*per/10+workers, workers); err != nil {
		return fmt.Errorf("%s warm-up: %w", cs, err)
	}
	req := payload(32)
	lat := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		lat[w] = make([]time.Duration, 0, per)
		wg.Add(1)
		go func(mine *[]time.Duration) {
			defer wg.Done()
			ctx := context.Background()
			for i := 0; i < per; i++ {
				start := time.Now()
				if _, err := client.Unary(ctx, req); err != nil {
					errs <- err
					return
				}
				*mine = append(*mine, time.Since(start))
			}
		}(&lat[w])
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("%s: %w", cs, err)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	for _, p := range []int{50, 90, 95, 99} {
		// Nearest rank: the smallest latency with at least p% of the calls at or below it.
		rank := int(math.Ceil(float64(p)/100*float64(len(all)))) - 1
		us := float64(all[rank].Nanoseconds()) / 1e3
		emit(cs, fmt.Sprintf("p%d_us", p), math.Round(us*1000)/1000, "us")
	}
	return nil
}

func main() {
	flag.StringVar(&competitor, "competitor", "grpchan", "grpchan | grpc-go-tcp")
	quick := flag.Bool("quick", false, "tiny counts: the whole run takes a few seconds")
	only := flag.String("case", "", "run only this case (default: all)")
	flag.Parse()

	cfg = config{target: time.Second, warmup: 200 * time.Millisecond, minOps: 20,
		latPerG: 5000, latWorkers: 10}
	if *quick {
		cfg = config{target: 30 * time.Millisecond, warmup: 10 * time.Millisecond, minOps: 5,
			latPerG: 200, latWorkers: 10}
	}

	client, closeFn, err := connect(competitor)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer closeFn()
	fmt.Fprintf(os.Stderr, "# rpc peer: competitor=%s GOMAXPROCS=%d NumCPU=%d %s\n",
		competitor, runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.Version())

	type namedCase struct {
		name string
		run  func() error
	}
	var cases []namedCase
	for _, s := range []struct {
		name string
		size int
	}{{"unary_32", 32}, {"unary_64", 64}, {"unary_1k", 1 << 10}, {"unary_10k", 10 << 10},
		{"unary_100k", 100 << 10}, {"unary_1m", 1 << 20}} {
		s := s
		cases = append(cases, namedCase{s.name, func() error {
			return measure(s.name, 1, unary(client, s.size))
		}})
	}
	cases = append(cases, namedCase{"server_stream_100x32", func() error {
		return measure("server_stream_100x32", 1, serverStream(client, 100, 32))
	}})
	cases = append(cases, namedCase{"bidi_echo", func() error {
		run, closeStream, err := bidi(client)
		if err != nil {
			return err
		}
		if err := measure("bidi_echo", 1, run); err != nil {
			return err
		}
		return closeStream()
	}})
	for _, g := range []int{10, 50, 100} {
		g := g
		name := fmt.Sprintf("concurrent_%d", g)
		cases = append(cases, namedCase{name, func() error {
			return measure(name, g, unary(client, 32))
		}})
	}
	cases = append(cases, namedCase{"latency", func() error { return latency(client) }})

	ran := false
	for _, c := range cases {
		if *only != "" && c.name != *only {
			continue
		}
		ran = true
		if err := c.run(); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
	}
	if !ran {
		fmt.Fprintf(os.Stderr, "unknown case %q\n", *only)
		os.Exit(2)
	}
}
