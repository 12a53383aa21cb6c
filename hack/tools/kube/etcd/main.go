// Command etcd is the etcd server, built from the pinned module so that the
// test harness never downloads a prebuilt binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
