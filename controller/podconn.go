package controller

import (
	"context"
	"net"
	"time"

	"k8s.io/client-go/rest"
)

// podReadDelay is how long a pod connection lets events gather after it had to wait for one: the
// most a pod event can be delayed. The controller batches what pod events ask of it for 500 ms
// (createBatch), so 20 ms is not noticed; a scale-up's events arrive every few milliseconds, and
// are then read several at a time.
const podReadDelay = 20 * time.Millisecond

// waitedRead is how long a read must have taken to count as one that waited for data: far above a
// read of data already received (microseconds), far below the gaps between a watch's events.
const waitedRead = time.Millisecond

// podConnections is cfg for the pod informer's own connections: HTTP/1.1, whose reads are
// coalesced (coalescingConn).
//
// Why: receiving a pod's watch events was the largest part of what a pod costs the manager besides
// its admission, and most of that was not the events but what each one woke: over HTTP/2, which
// the manager's other requests share, the connection's read loop read each event, handed it to the
// watch's goroutine through a pipe and acknowledged it with a flow-control write; and every event,
// arriving alone, cost a wake-up from the network poller and a read system call of its own. Over
// HTTP/1.1 the watch's goroutine reads its own connection, and a connection of its own can wait
// before reading without slowing any other request (docs/benchmarks.md, "The pod informer's own
// queue and connections").
func podConnections(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.NextProtos = []string{"http/1.1"}
	dial := cfg.Dial
	if dial == nil {
		// client-go's own dialer when none is set.
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	cfg.Dial = func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return &coalescingConn{Conn: c, delay: podReadDelay, sleep: time.Sleep}, nil
	}
	return cfg
}

// coalescingConn is a connection that reads a trickle of data in batches: after a read that
// waited for its data, it waits delay before the next, so that what arrives meanwhile is read by
// one system call and one wake-up; and so on while reads come back with less than they could take.
// A read that fills its buffer, as a list's reads do while the data flows, ends that: the next
// follows at once. A trickle's data is delayed by at most delay.
type coalescingConn struct {
	net.Conn
	delay time.Duration
	sleep func(time.Duration)
	// trickle: the last read did not fill its buffer, and it waited for its data or came after a
	// delay.
	trickle bool
}

func (c *coalescingConn) Read(p []byte) (int, error) {
	delayed := c.trickle
	if delayed {
		c.sleep(c.delay)
	}
	start := time.Now()
	n, err := c.Conn.Read(p)
	c.trickle = n < len(p) && (delayed || time.Since(start) >= waitedRead)
	return n, err
}
