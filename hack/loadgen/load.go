package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// plan hands out the requests of one phase. Closed loop (rate 0): each worker sends its next
// request as soon as its previous answer is in, until the deadline or the budget. Open loop: the
// i-th request is due at start + i/rate whoever sends it, so a slow answer delays the requests
// queued behind it and their latency counts from when they were due (no coordinated omission).
type plan struct {
	start    time.Time
	deadline time.Time
	budget   int64 // requests; 0: bounded by the deadline alone
	rate     float64
	tickets  atomic.Int64
}

// next returns when the next request is due (zero in closed loop), or false when the phase is over.
func (p *plan) next() (time.Time, bool) {
	i := p.tickets.Add(1) - 1
	if p.budget > 0 && i >= p.budget {
		return time.Time{}, false
	}
	if p.rate > 0 {
		due := p.start.Add(time.Duration(float64(i) * float64(time.Second) / p.rate))
		return due, due.Before(p.deadline)
	}
	return time.Time{}, time.Now().Before(p.deadline)
}

// errorCounts counts failures by kind and keeps the first of each kind to show.
type errorCounts map[string]*errorCount

type errorCount struct {
	n     int
	first error
}

func (e errorCounts) add(err error) {
	kind := failTransport
	var f *failure
	if errors.As(err, &f) {
		kind = f.kind
	}
	c := e[kind]
	if c == nil {
		c = &errorCount{first: err}
		e[kind] = c
	}
	c.n++
}

func (e errorCounts) merge(o errorCounts) {
	for k, c := range o {
		if mine := e[k]; mine != nil {
			mine.n += c.n
		} else {
			e[k] = &errorCount{n: c.n, first: c.first}
		}
	}
}

func (e errorCounts) total() int {
	n := 0
	for _, c := range e {
		n += c.n
	}
	return n
}

// phaseResult is what the workers of one phase saw.
type phaseResult struct {
	elapsed   time.Duration
	latencies []time.Duration // of the successful admissions
	errors    errorCounts
}

// runPhase runs workers under p until it is over and waits for their last answers.
func runPhase(ctx context.Context, workers []*worker, p *plan) phaseResult {
	var wg sync.WaitGroup
	lats := make([][]time.Duration, len(workers))
	errs := make([]errorCounts, len(workers))
	p.start = time.Now()
	for i, w := range workers {
		errs[i] = errorCounts{}
		wg.Go(func() { lats[i] = w.loop(ctx, p, errs[i]) })
	}
	wg.Wait()
	res := phaseResult{elapsed: time.Since(p.start), errors: errorCounts{}}
	for i := range workers {
		res.latencies = append(res.latencies, lats[i]...)
		res.errors.merge(errs[i])
	}
	return res
}

// loop sends the plan's requests and returns the latencies of the successful ones; each worker
// keeps its own slice, so recording takes no lock.
func (w *worker) loop(ctx context.Context, p *plan, errs errorCounts) []time.Duration {
	var lats []time.Duration
	for {
		due, ok := p.next()
		if !ok {
			return lats
		}
		// from is when the latency starts: the send, unless the request was already late when
		// this worker became free (open loop), then when it was due. Sleeping until a request is
		// due is the generator's own timer slack, not the webhook's latency.
		var from time.Time
		if !due.IsZero() {
			if wait := time.Until(due); wait > 0 {
				time.Sleep(wait)
			} else {
				from = due
			}
		}
		a, err := w.do(ctx)
		if err != nil {
			errs.add(err)
			continue
		}
		lat := a.rtt
		if !from.IsZero() {
			lat = a.end.Sub(from)
		}
		lats = append(lats, lat)
	}
}
