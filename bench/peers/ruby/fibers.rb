#!/usr/bin/env ruby
# frozen_string_literal: true

# fibers suite, competitors ruby-fiber and ruby-thread.
#
#   alloc       N units, each started (switch in) and then suspended (switch out); time
#               until the last has suspended, resident-set growth per unit
#   switch      2 units ping-pong, each switching to the other `switches` times
#   warm        `repeats` times: N units that start and finish, joined
#   throughput  `units` units that each yield `switches` times round-robin, `repeats` times
#
# --mode fiber:  Fiber.new + resume / Fiber.yield (no fiber scheduler). A fiber runs as soon
#                as it is resumed, so creation is Fiber.new + the first resume.
# --mode thread: Thread.new (default stack sizes). Ping-pong over two Thread::Queue; the
#                throughput round-robin yields with Thread.pass.
#
# Usage: ruby fibers.rb --mode fiber|thread [--quick]

require "etc"
require "json"

Sizes = Struct.new(:alloc_units, :switches, :warm_units, :warm_repeats,
                   :tp_units, :tp_switches, :tp_repeats)
FULL = Sizes.new(10_000, 10_000, 10_000, 10, 1_000, 100, 10)
QUICK = Sizes.new(1_000, 1_000, 1_000, 3, 100, 100, 3)

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

  # Returns [elapsed_s, rss_growth_bytes].
  def self.alloc(n)
    started = 0
    fibers = Array.new(n)
    rss0 = rss_bytes
    t0 = now
    n.times do |i|
      fiber = Fiber.new do
        started += 1
        Fiber.yield # suspended until released
      end
      fiber.resume # switch in; back here once it has suspended
      fibers[i] = fiber
    end
    elapsed = now - t0
    rss1 = rss_bytes
    raise "only #{started} of #{n} units started" unless started == n

    fibers.each(&:resume) # release: each one finishes
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

  def self.warm(n, repeats)
    Array.new(repeats) do
      t0 = now
      n.times { Fiber.new { nil }.resume } # runs to its end at once
      now - t0
    end
  end

  # The root fiber resumes every unit in turn until they are all done.
  def self.throughput(units, switches, repeats)
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

  def self.alloc(n)
    started = 0
    lock = Thread::Mutex.new
    all_started = Thread::ConditionVariable.new
    release = Thread::Queue.new # closed to release: pop then returns nil to every waiter
    threads = Array.new(n)
    rss0 = rss_bytes
    t0 = now
    n.times do |i|
      threads[i] = spawn do
        lock.synchronize do
          started += 1
          all_started.signal if started == n
        end
        release.pop
      end
    end
    lock.synchronize { all_started.wait(lock) until started == n }
    elapsed = now - t0
    rss1 = rss_bytes
    release.close
    threads.each(&:join)
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

  def self.warm(n, repeats)
    reps = Array.new(repeats) do
      t0 = now
      threads = Array.new(n) { spawn { nil } }
      threads.each(&:join)
      now - t0
    end
    settle
    reps
  end

  def self.throughput(units, switches, repeats)
    Array.new(repeats) do
      t0 = now
      threads = Array.new(units) { spawn { switches.times { Thread.pass } } }
      threads.each(&:join)
      now - t0
    end
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

  elapsed, growth = impl.alloc(sizes.alloc_units)
  emit(name, "alloc", "us_per_unit", elapsed * 1e6 / sizes.alloc_units, "us")
  emit(name, "alloc", "bytes_per_unit", growth.to_f / sizes.alloc_units, "bytes")

  elapsed = impl.switch(sizes.switches)
  total = 2.0 * sizes.switches
  emit(name, "switch", "us_per_switch", elapsed * 1e6 / total, "us")
  emit(name, "switch", "switches_per_s", total / elapsed, "switches/s")

  reps = impl.warm(sizes.warm_units, sizes.warm_repeats)
  emit(name, "warm", "first_alloc_us", reps.first * 1e6 / sizes.warm_units, "us")
  emit(name, "warm", "last_alloc_us", reps.last * 1e6 / sizes.warm_units, "us")

  reps = impl.throughput(sizes.tp_units, sizes.tp_switches, sizes.tp_repeats)
  emit(name, "throughput", "total_ms", reps.min * 1e3, "ms")
end

main(ARGV)
