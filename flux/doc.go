// Package flux reads what a running Flux instance says about itself: the output of the flux
// commands the hub runs in a root's lead broker container (Commands), parsed into a View of
// every rank (online or not, drained or draining, running a job or idle), the instance's state
// and the demand of the jobs that wait.
//
// The formats are flux-core 0.88.0's, as ../shared/flux-fixtures records them:
//
//   - flux uptime: " HH:MM:SS <state> <duration>,  owner <user>,  depth <n>,  size <n>" and,
//     in state run, ",  <n> drained" and ",  <n> offline" when they are not 0; a second line
//     says "submit disabled" and "scheduler disabled" when they are.
//   - flux resource status -n -o '{state} {up} {nnodes} {ranks} {nodelist}': one line per
//     group of ranks in one state; the state carries a '*' and up is '✗' for ranks that are
//     not online.
//   - flux jobs --json -f pending,running: {"jobs": [...]}, each job with its state (SCHED while
//     it waits for resources), the nodes it asked for (nnodes) and, once it runs, its ranks.
//   - flux overlay status --no-pretty --no-ghost: "<rank> <host>: <status>[ <detail>]".
//   - flux resource drain -n -o '{timestamp} {state} {ranks} {nodelist} {reason}'.
//
// Ranks are RFC 22 idsets ("3", "0-1", "[0-2,5]"). Every parser refuses what it does not
// understand with an error that quotes the line, rather than guess: a misread view would make
// the hub grow or shrink bursts for nothing.
package flux
