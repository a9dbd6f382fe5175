// Command probe is the program of the image the real-node tests' pods run (built static, packed
// by the tests, imported into the nodes):
//
//	probe exit CODE MESSAGE     write MESSAGE as the termination message, exit with CODE
//	probe serve PORT            answer every TCP connection on PORT with the host name
//	probe dial HOST:PORT        connect, and end with what the server said as the message
//	probe ignore-term           ignore SIGTERM and wait: only the kill at the grace period ends it
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

const terminationLog = "/dev/termination-log"

func main() {
	if len(os.Args) < 2 {
		fail("usage: probe exit|serve|dial|ignore-term ...")
	}
	switch os.Args[1] {
	case "exit":
		code, err := strconv.Atoi(arg(2))
		if err != nil {
			fail(err.Error())
		}
		end(code, arg(3))
	case "serve":
		l, err := net.Listen("tcp", ":"+arg(2))
		if err != nil {
			fail(err.Error())
		}
		host, _ := os.Hostname()
		fmt.Println("serving on", l.Addr())
		for {
			c, err := l.Accept()
			if err != nil {
				fail(err.Error())
			}
			_, _ = io.WriteString(c, "hello from "+host)
			_ = c.Close()
		}
	case "dial":
		var last error
		for range 60 { // the server's pod may start after this one
			c, err := net.DialTimeout("tcp", arg(2), 2*time.Second)
			if err == nil {
				b, err := io.ReadAll(c)
				if err == nil {
					end(0, string(b))
				}
			}
			last = err
			time.Sleep(time.Second)
		}
		fail(last.Error())
	case "ignore-term":
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		fmt.Println("ignoring SIGTERM")
		for range ch {
			fmt.Println("got SIGTERM; ignoring it")
		}
	default:
		fail("unknown mode " + os.Args[1])
	}
}

func arg(i int) string {
	if len(os.Args) <= i {
		fail("missing argument " + strconv.Itoa(i))
	}
	return os.Args[i]
}

func end(code int, message string) {
	_ = os.WriteFile(terminationLog, []byte(message), 0o644)
	os.Exit(code)
}

func fail(message string) { end(2, message) }
