// Package hostlist reads and writes Flux hostlists (RFC 29), the compact
// notation Flux uses for ordered lists of host names, such as the hosts of a
// broker's [bootstrap] table.
//
// A hostlist is a list of expressions separated by commas; spaces and tabs
// separate expressions too, and runs of separators count as one. Each
// expression is a host name, or a prefix, a bracketed id list and an optional
// suffix:
//
//	node1,node2,login        three hosts
//	node[1-3,7]              node1 node2 node3 node7
//	node[01-10]              node01 ... node10: the digits of the first id in
//	                         each range fix the padding of the whole range
//	node[1-2]-ib             node1-ib node2-ib
//	[0-2]                    0 1 2 (the prefix may be empty)
//	node[1,1,2]              node1 node1 node2 (repeats are kept)
//
// The list keeps its order and its duplicates. Writing a list back
// ([Compress], [Hostlist.String]) follows flux-core's libhostlist exactly:
// hosts are split into a prefix and a trailing number, a host is joined to the
// range before it only when it has the same prefix, compatible zero padding
// and the next number, and neighbouring ranges with the same prefix share one
// pair of brackets. So node1 node2 node3 node5 node07 node08 a becomes
// node[1-3,5,07-08],a, and node2 node1 stays node[2,1]. Padding is part of a
// name: node07 and node7 are different hosts.
//
// Parsing accepts what libhostlist accepts, with the same limits (at most
// 1048576 hosts in one range and 10240 ranges in one pair of brackets). Where
// libhostlist would quietly read something other than what was written, or
// produce a name it cannot read back, parsing fails instead with a
// [*SyntaxError] that names the byte position: a second bracket group in one
// name, spaces, signs or letters inside brackets, a range without an upper
// bound (n[1-]), a number beyond 64 bits, a name longer than 255 bytes, a
// character outside printable ASCII (a newline, say).
//
// RFC 29 says the padding of the first id applies to the whole id list
// ([005,4] would be 005,004); libhostlist, and so this package, pads each
// element by its own first id (005,4), which is also what its encoder
// assumes.
//
// A [Hostlist] stores ranges, not host names, so counting, indexing and
// searching a list such as node[0-999999] costs time in proportion to the
// number of ranges.
package hostlist
