// grpc-cluster-go: the cluster scenario of crates/spindle-grpc-interop/tests/cluster.rs with a
// grpc-go client, for comparison (docs/perf/grpc-cluster.md). Three interop_server processes
// (spindle-grpc's, with its test hooks) on 127.0.0.1-3, one port, behind a name that a manual
// resolver serves; one client making a steady stream of unary calls (deadline 2 s) through
// round_robin with a retry policy for UNAVAILABLE; while the calls go on, s2 is killed
// (SIGKILL), s4 started on 127.0.0.4 and the records changed to s1, s3, s4, then s1 answers
// UNAVAILABLE. Prints one JSON object: the calls, the failed ones by code, and which servers
// answered in each phase.
//
//	go run . -server PATH/TO/interop_server
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
)

const serviceConfig = `{
  "loadBalancingConfig": [{"round_robin": {}}],
  "methodConfig": [{
    "name": [{}],
    "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.01s", "maxBackoff": "0.1s",
                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}
  }]
}`

type outcome struct {
	server string
	code   string
}

func freePort() int {
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		ok := true
		for last := 1; last <= 4; last++ {
			l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:%d", last, port))
			if err != nil {
				ok = false
				break
			}
			l2.Close()
		}
		if ok {
			return port
		}
	}
	panic("no free port")
}

func start(bin string, last, port int, dir string) *exec.Cmd {
	cmd := exec.Command(bin, "--host", fmt.Sprintf("127.0.0.%d", last), "--port", fmt.Sprint(port),
		"--server_id", fmt.Sprintf("s%d", last), "--unavailable_file", filepath.Join(dir, fmt.Sprintf("unavailable-s%d", last)))
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	for i := 0; i < 2000; i++ {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.%d:%d", last, port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return cmd
		}
		time.Sleep(10 * time.Millisecond)
	}
	panic("interop_server did not listen")
}

func addrs(port int, lasts ...int) []resolver.Address {
	var out []resolver.Address
	for _, last := range lasts {
		out = append(out, resolver.Address{Addr: fmt.Sprintf("127.0.0.%d:%d", last, port)})
	}
	return out
}

func main() {
	bin := flag.String("server", "target/debug/interop_server", "spindle-grpc-interop's interop_server")
	flag.Parse()
	port := freePort()
	dir, _ := os.MkdirTemp("", "grpc-cluster-go")
	defer os.RemoveAll(dir)
	servers := map[int]*exec.Cmd{}
	for last := 1; last <= 3; last++ {
		servers[last] = start(*bin, last, port, dir)
	}
	defer func() {
		for _, s := range servers {
			s.Process.Kill()
			s.Wait()
		}
	}()

	r := manual.NewBuilderWithScheme("cluster")
	r.InitialState(resolver.State{Addresses: addrs(port, 1, 2, 3)})
	conn, err := grpc.NewClient("cluster:///cluster.test", grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultServiceConfig(serviceConfig))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	client := testpb.NewTestServiceClient(conn)

	var mu sync.Mutex
	var outcomes []outcome
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			var header metadata.MD
			_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{ResponseSize: 1}, grpc.Header(&header))
			cancel()
			o := outcome{}
			if err != nil {
				o.code = status.Code(err).String()
			} else if ids := header.Get("x-server-id"); len(ids) > 0 {
				o.server = ids[0]
			}
			mu.Lock()
			outcomes = append(outcomes, o)
			mu.Unlock()
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(outcomes) }
	since := func(mark int) map[string]int {
		mu.Lock()
		defer mu.Unlock()
		seen := map[string]int{}
		for _, o := range outcomes[mark:] {
			if o.server != "" {
				seen[o.server]++
			}
		}
		return seen
	}
	waitCalls := func(n int) {
		target := count() + n
		for end := time.Now().Add(20 * time.Second); count() < target && time.Now().Before(end); {
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor := func(cond func() bool) bool {
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if cond() {
				return true
			}
		}
		return cond()
	}

	phases := map[string]map[string]int{}
	waitFor(func() bool { return len(since(0)) == 3 })
	phases["all three"] = since(0)

	servers[2].Process.Kill()
	servers[2].Wait()
	delete(servers, 2)
	killed := count()
	waitCalls(300)
	phases["after s2 killed"] = since(killed + 50)

	servers[4] = start(*bin, 4, port, dir)
	r.UpdateState(resolver.State{Addresses: addrs(port, 1, 3, 4)})
	changed := count()
	newSeen := waitFor(func() bool { return since(changed)["s4"] > 0 })
	phases["after the records changed"] = since(changed)

	os.WriteFile(filepath.Join(dir, "unavailable-s1"), nil, 0o644)
	failing := count()
	waitCalls(300)
	phases["while s1 answers UNAVAILABLE"] = since(failing + 50)

	close(stop)
	<-done
	failed := map[string]int{}
	for _, o := range outcomes {
		if o.code != "" {
			failed[o.code]++
		}
	}
	out, _ := json.MarshalIndent(map[string]any{
		"client": "grpc-go " + grpc.Version, "calls": len(outcomes), "failed": failed,
		"new_server_reached": newSeen, "servers_by_phase": phases,
	}, "", "  ")
	fmt.Println(string(out))
}
