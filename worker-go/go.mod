module cryptoperf/worker-go

go 1.26.0

require (
	github.com/HdrHistogram/hdrhistogram-go v1.1.2
	github.com/cloudflare/circl v1.6.5
	golang.org/x/crypto v0.59.0
	golang.org/x/sys v0.50.0
)
