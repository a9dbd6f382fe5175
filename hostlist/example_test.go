package hostlist_test

import (
	"errors"
	"fmt"

	"github.com/fluxfed/fluxfed/hostlist"
)

func ExampleExpand() {
	hosts, err := hostlist.Expand("login,node[1-3,07],gpu[1-2]-ib")
	fmt.Println(hosts, err)
	// Output: [login node1 node2 node3 node07 gpu1-ib gpu2-ib] <nil>
}

func ExampleExpand_error() {
	_, err := hostlist.Expand("node[1-4],gpu[3-1]")
	var se *hostlist.SyntaxError
	if errors.As(err, &se) {
		fmt.Println(se.Pos, se.Msg)
	}
	// Output: 14 invalid range "3-1"
}

func ExampleCompress() {
	fmt.Println(hostlist.Compress([]string{"node1", "node2", "node3", "node5", "node07", "node08", "node010", "a", "b"}))
	fmt.Println(hostlist.Compress([]string{"node2", "node1", "node1"}))
	// Output:
	// node[1-3,5,07-08,010],a,b
	// node[2,1,1]
}

func ExampleHostlist() {
	hl, err := hostlist.Parse("burst-[0-999999]")
	if err != nil {
		panic(err)
	}
	host, _ := hl.Nth(123456)
	fmt.Println(hl.Count(), host, hl.Find("burst-999999"))
	// Output: 1000000 burst-123456 999999
}

func ExampleHostlist_Sort() {
	hl, _ := hostlist.Parse("host2,host1,host3,host1")
	hl.Sort()
	fmt.Println(hl)
	hl.Uniq()
	fmt.Println(hl)
	// Output:
	// host[1,1-3]
	// host[1-3]
}
