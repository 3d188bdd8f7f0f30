// crisweep stops and removes every pod sandbox of a CRI runtime, so that the runtime runs
// each sandbox's CNI DEL (veth and IP released) before the node is torn down.
//
//	crisweep unix:///run/loadstage-node/containerd/containerd.sock
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: crisweep unix:///path/to/cri.sock")
		os.Exit(2)
	}
	conn, err := grpc.NewClient(os.Args[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail(err)
	}
	defer conn.Close()
	runtime := cri.NewRuntimeServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sandboxes, err := runtime.ListPodSandbox(ctx, &cri.ListPodSandboxRequest{})
	if err != nil {
		fail(err)
	}
	removed := 0
	for _, sandbox := range sandboxes.Items {
		name := sandbox.Metadata.Namespace + "/" + sandbox.Metadata.Name
		if _, err := runtime.StopPodSandbox(ctx, &cri.StopPodSandboxRequest{PodSandboxId: sandbox.Id}); err != nil {
			fmt.Fprintf(os.Stderr, "stop %s: %v\n", name, err)
		}
		if _, err := runtime.RemovePodSandbox(ctx, &cri.RemovePodSandboxRequest{PodSandboxId: sandbox.Id}); err != nil {
			fmt.Fprintf(os.Stderr, "remove %s: %v\n", name, err)
			continue
		}
		removed++
	}
	fmt.Printf("removed %d of %d pod sandboxes\n", removed, len(sandboxes.Items))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "crisweep:", err)
	os.Exit(1)
}
