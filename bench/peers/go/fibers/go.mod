module spindle.bench/fibers

go 1.26.0
