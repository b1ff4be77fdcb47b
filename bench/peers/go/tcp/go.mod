module tcppeer

go 1.26.0
