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
// bound (n[1-]), a ']' outside a pair of brackets (a]b[1], n[1]]: libhostlist
// keeps it in the name, and after n[1]] stops splitting the list at commas),
// a number beyond 64 bits, a name longer than 255 bytes, a character outside
// printable ASCII (a newline, say), and, before a suffix, an id written 20 or
// more digits wider than the first id of its list (libhostlist cuts those
// names short: n[1,000000000000000000001]x).
//
// Where libhostlist is plainly wrong this package does not copy it: it joins
// n18446744073709551615 and n0 into one broken range, loops forever on a
// range that ends at 18446744073709551615 before a suffix, sorts numbers
// 2^31 or more apart by a truncated difference (and may then fail an
// assertion or lose hosts), drops a lone name whose trailing number is beyond
// 64 bits, and its find misses n10000000001 in n1[0000000000-0000000001]
// (ten or more digits after a prefix that ends in a digit) but matches a
// number beyond 64 bits as if it were 18446744073709551615.
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
