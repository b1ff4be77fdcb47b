# fibers suite (shapes of seed 003), competitor crystal-fiber.
#
#   alloc       N fibers, each yielding twice and then parked on a release channel; timed:
#               creation until the last has parked + release until all are done; resident
#               set growth per unit with all N parked
#   switch      2 fibers, each yielding `switches` times: every yield hands control to the
#               other one
#   warm        `repeats` rounds of N fibers that yield once and finish, joined: first round
#               against last (per unit)
#   throughput  `repeats` rounds of `units` fibers that each yield `switches` times, joined;
#               the fastest round counts
#
# One fiber per unit (`spawn`), single-threaded scheduler (built without -Dpreview_mt); a
# switch is `Fiber.yield` (in Crystal 1.x a zero-second sleep: the fiber is rescheduled
# through the event loop). Units report completion on a channel.
#
# Usage: fibers [--quick]

struct Sizes
  getter alloc_units, alloc_switches, switches, warm_units, warm_switches, warm_repeats
  getter tp_units, tp_switches, tp_repeats

  def initialize(@alloc_units : Int32, @alloc_switches : Int32, @switches : Int32,
                 @warm_units : Int32, @warm_switches : Int32, @warm_repeats : Int32,
                 @tp_units : Int32, @tp_switches : Int32, @tp_repeats : Int32)
  end
end

FULL  = Sizes.new(10_000, 2, 10_000, 10_000, 1, 10, 1_000, 100, 10)
QUICK = Sizes.new(1_000, 2, 1_000, 1_000, 1, 3, 100, 100, 3)

COMPETITOR = "crystal-fiber"
PAGE_SIZE  = LibC.sysconf(LibC::SC_PAGESIZE).to_i64

# Resident set: /proc/self/statm field 2 x page size.
def rss_bytes : Int64
  File.read("/proc/self/statm").split[1].to_i64 * PAGE_SIZE
end

def emit(kase : String, metric : String, value : Float64, unit : String)
  v = (value * 1e4).round / 1e4
  puts %({"suite":"fibers","case":"#{kase}","competitor":"#{COMPETITOR}","metric":"#{metric}","value":#{v},"unit":"#{unit}"})
  STDOUT.flush
end

# Returns {elapsed, rss growth in bytes}.
def alloc(n : Int32, switches : Int32) : {Time::Span, Int64}
  parked = 0
  all_parked = Channel(Nil).new(1)
  release = Channel(Nil).new # closed to release: receive? then returns nil to every waiter
  done = Channel(Nil).new(n)
  rss0 = rss_bytes
  t0 = Time.monotonic
  n.times do
    spawn do
      switches.times { Fiber.yield }
      parked += 1
      all_parked.send(nil) if parked == n
      release.receive?
      done.send(nil)
    end
  end
  all_parked.receive
  to_peak = Time.monotonic - t0
  rss1 = rss_bytes
  t1 = Time.monotonic
  release.close
  n.times { done.receive }
  {to_peak + (Time.monotonic - t1), rss1 - rss0}
end

def rounds(units : Int32, switches : Int32, repeats : Int32) : Array(Time::Span)
  Array.new(repeats) do
    done = Channel(Nil).new(units)
    t0 = Time.monotonic
    units.times do
      spawn do
        switches.times { Fiber.yield }
        done.send(nil)
      end
    end
    units.times { done.receive }
    Time.monotonic - t0
  end
end

def us(span : Time::Span) : Float64
  span.total_microseconds
end

sizes = FULL
ARGV.each do |arg|
  case arg
  when "--quick" then sizes = QUICK
  else
    STDERR.puts "unknown argument #{arg}; usage: fibers [--quick]"
    exit 2
  end
end

elapsed, growth = alloc(sizes.alloc_units, sizes.alloc_switches)
emit("alloc", "us_per_unit", us(elapsed) / sizes.alloc_units, "us")
emit("alloc", "bytes_per_unit", growth.to_f64 / sizes.alloc_units, "bytes")

# The switch case is a round of 2 units.
elapsed = rounds(2, sizes.switches, 1).first
total = 2.0 * sizes.switches
emit("switch", "us_per_switch", us(elapsed) / total, "us")
emit("switch", "switches_per_s", total / elapsed.total_seconds, "switches/s")

reps = rounds(sizes.warm_units, sizes.warm_switches, sizes.warm_repeats)
emit("warm", "first_alloc_us", us(reps.first) / sizes.warm_units, "us")
emit("warm", "last_alloc_us", us(reps.last) / sizes.warm_units, "us")

reps = rounds(sizes.tp_units, sizes.tp_switches, sizes.tp_repeats)
emit("throughput", "total_ms", reps.min.total_milliseconds, "ms")
