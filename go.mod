module github.com/freshinformer/freshinformer

go 1.26.0

require (
	go.uber.org/goleak v1.3.0
	k8s.io/apimachinery v0.37.2
)
