#!/usr/bin/env ruby
# frozen_string_literal: true

# fibers suite (shapes of seed 003), competitors ruby-fiber and ruby-thread.
#
#   alloc       N units, each switching twice and then suspended until released; timed:
#               creation until the last has suspended + release until all are done;
#               resident-set growth per unit with all N suspended
#   switch      2 units, each switching to the other `switches` times
#   warm        `repeats` rounds of N units that switch once and finish: first round
#               against last (per unit)
#   throughput  `repeats` rounds of `units` units that each switch `switches` times; the
#               fastest round counts
#
# --mode fiber:  Fiber.new + resume / Fiber.yield (no fiber scheduler), as Ruby's own
#                fiber-vs-thread benchmark: the creator (root fiber) resumes every unit in
#                turn, round-robin, and a unit switches with Fiber.yield; the ping-pong is
#                an explicit hand-off (a resumes b, b yields back to a).
# --mode thread: Thread.new (default stack sizes); a unit switches with Thread.pass, the
#                ping-pong hands off over two Thread::Queue.
#
# Usage: ruby fibers.rb --mode fiber|thread [--quick]

require "etc"
require "json"

Sizes = Struct.new(:alloc_units, :alloc_switches, :switches, :warm_units, :warm_switches,
                   :warm_repeats, :tp_units, :tp_switches, :tp_repeats)
FULL = Sizes.new(10_000, 2, 10_000, 10_000, 1, 10, 1_000, 100, 10)
QUICK = Sizes.new(1_000, 2, 1_000, 1_000, 1, 3, 100, 100, 3)

PAGE_SIZE = Etc.sysconf(Etc::SC_PAGESIZE)
BASE_THREADS = Dir.children("/proc/self/task").size

# Resident set: /proc/self/statm field 2 x page size.
def rss_bytes
  File.read("/proc/self/statm").split[1].to_i * PAGE_SIZE
end

def now
  Process.clock_gettime(Process::CLOCK_MONOTONIC)
end

# Fibers: one Fiber per unit, resumed by the creator (the root fiber).
module FiberMode
  NAME = "ruby-fiber"

  # Returns [elapsed_s, rss_growth_bytes]. A unit yields `switches` times, then once more
  # to stay suspended (parked) until the release pass resumes it to its end.
  def self.alloc(n, switches)
    parked = 0
    rss0 = rss_bytes
    t0 = now
    fibers = Array.new(n) do
      Fiber.new do
        switches.times { Fiber.yield }
        parked += 1
        Fiber.yield # parked until released
      end
    end
    (switches + 1).times { fibers.each(&:resume) }
    to_peak = now - t0
    rss1 = rss_bytes
    raise "only #{parked} of #{n} units parked" unless parked == n

    t1 = now
    fibers.each(&:resume) # release: each one finishes
    elapsed = to_peak + (now - t1)
    raise "a unit is still alive" if fibers.any?(&:alive?)

    [elapsed, rss1 - rss0]
  end

  # a resumes b, b yields back to a: every resume and every yield is one switch.
  def self.switch(switches)
    b = Fiber.new { switches.times { Fiber.yield } }
    a = Fiber.new { switches.times { b.resume } }
    t0 = now
    a.resume
    elapsed = now - t0
    b.resume # b is suspended in its last yield: let it finish
    raise "a unit is still alive" if a.alive? || b.alive?

    elapsed
  end

  # The root fiber resumes every unit in turn until they are all done.
  def self.rounds(units, switches, repeats)
    Array.new(repeats) do
      t0 = now
      fibers = Array.new(units) { Fiber.new { switches.times { Fiber.yield } } }
      (switches + 1).times { fibers.each(&:resume) }
      elapsed = now - t0
      raise "a unit is still alive" if fibers.any?(&:alive?)

      elapsed
    end
  end
end

# Threads: one Thread per unit.
module ThreadMode
  NAME = "ruby-thread"

  # Ruby keeps the native thread of a finished Thread cached for 3 s for reuse; 10,000 of
  # them timing out together slow the next case down by an order of magnitude. After the
  # cases that leave them (alloc, warm), wait until they are gone (not timed).
  def self.settle
    deadline = now + 15
    sleep 0.05 while Dir.children("/proc/self/task").size > BASE_THREADS && now < deadline
  end

  def self.spawn(&block)
    Thread.new(&block)
  rescue ThreadError => e
    # Out of threads or memory: say so and stop rather than hang.
    warn "fibers.rb ruby-thread: cannot create a thread: #{e.message}"
    exit!(1)
  end

  def self.alloc(n, switches)
    parked = 0
    lock = Thread::Mutex.new
    all_parked = Thread::ConditionVariable.new
    release = Thread::Queue.new # closed to release: pop then returns nil to every waiter
    threads = Array.new(n)
    rss0 = rss_bytes
    t0 = now
    n.times do |i|
      threads[i] = spawn do
        switches.times { Thread.pass }
        lock.synchronize do
          parked += 1
          all_parked.signal if parked == n
        end
        release.pop
      end
    end
    lock.synchronize { all_parked.wait(lock) until parked == n }
    to_peak = now - t0
    rss1 = rss_bytes
    t1 = now
    release.close
    threads.each(&:join)
    elapsed = to_peak + (now - t1)
    settle
    [elapsed, rss1 - rss0]
  end

  # Strict ping-pong: each thread blocks in Queue#pop until the other hands it the turn.
  def self.switch(switches)
    to_a = Thread::Queue.new
    to_b = Thread::Queue.new
    t0 = now
    a = spawn do
      switches.times do
        to_b.push(true)
        to_a.pop
      end
    end
    b = spawn do
      switches.times do
        to_b.pop
        to_a.push(true)
      end
    end
    a.join
    b.join
    now - t0
  end

  def self.rounds(units, switches, repeats)
    reps = Array.new(repeats) do
      t0 = now
      threads = Array.new(units) { spawn { switches.times { Thread.pass } } }
      threads.each(&:join)
      now - t0
    end
    settle
    reps
  end
end

def emit(competitor, kase, metric, value, unit)
  puts JSON.generate({ suite: "fibers", case: kase, competitor: competitor,
                       metric: metric, value: value.round(4), unit: unit })
  $stdout.flush
end

def main(argv)
  mode = nil
  sizes = FULL
  args = argv.dup
  until args.empty?
    case (arg = args.shift)
    when "--mode" then mode = args.shift
    when "--quick" then sizes = QUICK
    else abort "unknown argument #{arg.inspect}; usage: fibers.rb --mode fiber|thread [--quick]"
    end
  end
  impl = { "fiber" => FiberMode, "thread" => ThreadMode }[mode] or
    abort "usage: fibers.rb --mode fiber|thread [--quick]"
  name = impl::NAME

  elapsed, growth = impl.alloc(sizes.alloc_units, sizes.alloc_switches)
  emit(name, "alloc", "us_per_unit", elapsed * 1e6 / sizes.alloc_units, "us")
  emit(name, "alloc", "bytes_per_unit", growth.to_f / sizes.alloc_units, "bytes")

  elapsed = impl.switch(sizes.switches)
  total = 2.0 * sizes.switches
  emit(name, "switch", "us_per_switch", elapsed * 1e6 / total, "us")
  emit(name, "switch", "switches_per_s", total / elapsed, "switches/s")

  reps = impl.rounds(sizes.warm_units, sizes.warm_switches, sizes.warm_repeats)
  emit(name, "warm", "first_alloc_us", reps.first * 1e6 / sizes.warm_units, "us")
  emit(name, "warm", "last_alloc_us", reps.last * 1e6 / sizes.warm_units, "us")

  reps = impl.rounds(sizes.tp_units, sizes.tp_switches, sizes.tp_repeats)
  emit(name, "throughput", "total_ms", reps.min * 1e3, "ms")
end

main(ARGV)
