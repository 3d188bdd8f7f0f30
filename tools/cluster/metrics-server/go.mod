module loadstage.io/tools/metrics-server

go 1.23.0

require sigs.k8s.io/metrics-server v0.7.2
