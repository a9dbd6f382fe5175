package brokerprobe

import (
	"bytes"
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProbeReportsEachEndpoint: an endpoint where nothing listens and one that answers as no
// Flux broker each get a line saying why, and the error names both.
func TestProbeReportsEachEndpoint(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := closed.Addr().String()
	require.NoError(t, closed.Close())
	http, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = http.Close() }()
	go func() {
		for {
			c, err := http.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
			_ = c.Close()
		}
	}()

	var out bytes.Buffer
	err = ProbeAndRecord(context.Background(), []string{closedAddr, http.Addr().String(), "nowhere"}, &out)
	require.EqualError(t, err, "3 of 3 endpoints did not answer as a Flux broker: "+closedAddr+", "+http.Addr().String()+", nowhere")
	require.Contains(t, out.String(), closedAddr+": no Flux broker answers from the member: lead broker "+closedAddr+": cannot connect: ")
	require.Contains(t, out.String(), http.Addr().String()+": no Flux broker answers from the member: lead broker "+http.Addr().String()+": the endpoint answered but is not a ZMTP 3 CURVE peer")
	require.Contains(t, out.String(), `nowhere: no Flux broker answers from the member: "nowhere" is not HOST:PORT: address nowhere: missing port in address`)
}

func TestSplitEndpoint(t *testing.T) {
	host, port, err := SplitEndpoint("broker.example:8050")
	require.NoError(t, err)
	require.Equal(t, "broker.example", host)
	require.Equal(t, int32(8050), port)
	_, _, err = SplitEndpoint("broker.example:0")
	require.EqualError(t, err, `"broker.example:0": port "0" is not a TCP port (1-65535)`)
	_, _, err = SplitEndpoint("broker.example")
	require.EqualError(t, err, `"broker.example" is not HOST:PORT: address broker.example: missing port in address`)
}
