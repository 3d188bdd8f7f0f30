module loadstage.io/tools/coredns

go 1.23.0

require github.com/coredns/coredns v1.11.3
