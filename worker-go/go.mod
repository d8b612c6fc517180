module cryptoperf/worker-go

go 1.26.0

require (
	github.com/HdrHistogram/hdrhistogram-go v1.1.2 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
