module httppeer

go 1.26.0
