// fibers suite (shapes of seed 003), competitors go-goroutine and go-locked-thread.
//
//	alloc       N goroutines, each yielding twice and then parked on a release channel;
//	            timed: creation until the last has parked + release until all are done;
//	            resident-set growth per unit with all N parked
//	switch      2 goroutines, each switching to the other `switches` times
//	warm        `repeats` rounds of N goroutines that yield once and finish, joined:
//	            first round against last (per unit)
//	throughput  `repeats` rounds of `units` goroutines that each yield `switches` times,
//	            joined; the fastest round counts
//
// A yield is runtime.Gosched().
// -mode goroutine: plain goroutines (the manifest runs it with GOMAXPROCS=1, one
// scheduler like one spindle worker); the switch case is runtime.Gosched() (default) or
// an unbuffered channel hand-off (-switch chan).
// -mode locked: every goroutine first calls runtime.LockOSThread, so each unit owns an
// OS thread (default GOMAXPROCS, as threads); the switch case is an unbuffered channel
// hand-off (a thread hand-off, as the other thread competitors' ping-pong).
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type sizes struct {
	allocUnits, allocSwitches, switches  int
	warmUnits, warmSwitches, warmRepeats int
	tpUnits, tpSwitches, tpRepeats       int
}

var (
	full  = sizes{10_000, 2, 10_000, 10_000, 1, 10, 1_000, 100, 10}
	quick = sizes{1_000, 2, 1_000, 1_000, 1, 3, 100, 100, 3}
)

var (
	competitor string
	locked     bool
)

func emit(kase, metric string, value float64, unit string) {
	v := strconv.FormatFloat(math.Round(value*1e4)/1e4, 'f', -1, 64)
	fmt.Printf("{\"suite\":\"fibers\",\"case\":%q,\"competitor\":%q,\"metric\":%q,\"value\":%s,\"unit\":%q}\n",
		kase, competitor, metric, v, unit)
}

// rssBytes is the resident set: /proc/self/statm field 2 × page size.
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		panic(err)
	}
	f := strings.Fields(string(b))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		panic(err)
	}
	return pages * int64(os.Getpagesize())
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// unitStart is the first thing every unit does.
func unitStart() {
	if locked {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
	}
}

// alloc: n units, each yielding `switches` times and then parked on a release channel.
// Timed: creation until the last has parked, plus release until all are done (the RSS
// reading in between is not timed).
func alloc(n, switches int) (time.Duration, int64) {
	var parked atomic.Int64
	allParked := make(chan struct{})
	release := make(chan struct{})
	var done sync.WaitGroup
	done.Add(n)
	rss0 := rssBytes()
	t0 := time.Now()
	for i := 0; i < n; i++ {
		go func() {
			unitStart()
			for j := 0; j < switches; j++ {
				runtime.Gosched()
			}
			if parked.Add(1) == int64(n) {
				close(allParked)
			}
			<-release
			done.Done()
		}()
	}
	<-allParked
	toPeak := time.Since(t0)
	rss1 := rssBytes()
	t1 := time.Now()
	close(release)
	done.Wait()
	return toPeak + time.Since(t1), rss1 - rss0
}

// switchGosched: two goroutines, each calling runtime.Gosched() `switches` times.
func switchGosched(switches int) time.Duration {
	var done sync.WaitGroup
	done.Add(2)
	t0 := time.Now()
	for i := 0; i < 2; i++ {
		go func() {
			unitStart()
			for j := 0; j < switches; j++ {
				runtime.Gosched()
			}
			done.Done()
		}()
	}
	done.Wait()
	return time.Since(t0)
}

// switchChan: strict ping-pong over two unbuffered channels.
func switchChan(switches int) time.Duration {
	var done sync.WaitGroup
	done.Add(2)
	ab, ba := make(chan struct{}), make(chan struct{})
	t0 := time.Now()
	go func() {
		unitStart()
		for j := 0; j < switches; j++ {
			ab <- struct{}{}
			<-ba
		}
		done.Done()
	}()
	go func() {
		unitStart()
		for j := 0; j < switches; j++ {
			<-ab
			ba <- struct{}{}
		}
		done.Done()
	}()
	done.Wait()
	return time.Since(t0)
}

// rounds: `repeats` times, `units` goroutines that each yield `switches` times, joined.
func rounds(units, switches, repeats int) []time.Duration {
	reps := make([]time.Duration, 0, repeats)
	for r := 0; r < repeats; r++ {
		var done sync.WaitGroup
		done.Add(units)
		t0 := time.Now()
		for i := 0; i < units; i++ {
			go func() {
				unitStart()
				for j := 0; j < switches; j++ {
					runtime.Gosched()
				}
				done.Done()
			}()
		}
		done.Wait()
		reps = append(reps, time.Since(t0))
	}
	return reps
}

func main() {
	mode := flag.String("mode", "goroutine", "goroutine | locked")
	sw := flag.String("switch", "", "switch case mechanism: gosched | chan (default: gosched for goroutine, chan for locked)")
	q := flag.Bool("quick", false, "small sizes")
	flag.Parse()
	s := full
	if *q {
		s = quick
	}
	switch *mode {
	case "goroutine":
		competitor = "go-goroutine"
		if *sw == "" {
			*sw = "gosched"
		}
	case "locked":
		competitor = "go-locked-thread"
		locked = true
		if *sw == "" {
			*sw = "chan"
		}
		// One OS thread per unit: lift the default limit of 10,000 threads.
		debug.SetMaxThreads(4*s.allocUnits + 1000)
	default:
		fmt.Fprintf(os.Stderr, "unknown -mode %q\n", *mode)
		os.Exit(2)
	}

	elapsed, growth := alloc(s.allocUnits, s.allocSwitches)
	emit("alloc", "us_per_unit", us(elapsed)/float64(s.allocUnits), "us")
	emit("alloc", "bytes_per_unit", float64(growth)/float64(s.allocUnits), "bytes")

	var d time.Duration
	switch *sw {
	case "gosched":
		d = switchGosched(s.switches)
	case "chan":
		d = switchChan(s.switches)
	default:
		fmt.Fprintf(os.Stderr, "unknown -switch %q\n", *sw)
		os.Exit(2)
	}
	total := float64(2 * s.switches)
	emit("switch", "us_per_switch", us(d)/total, "us")
	emit("switch", "switches_per_s", total/d.Seconds(), "switches/s")

	reps := rounds(s.warmUnits, s.warmSwitches, s.warmRepeats)
	emit("warm", "first_alloc_us", us(reps[0])/float64(s.warmUnits), "us")
	emit("warm", "last_alloc_us", us(reps[len(reps)-1])/float64(s.warmUnits), "us")

	reps = rounds(s.tpUnits, s.tpSwitches, s.tpRepeats)
	best := reps[0]
	for _, r := range reps {
		best = min(best, r)
	}
	emit("throughput", "total_ms", float64(best.Nanoseconds())/1e6, "ms")
}
