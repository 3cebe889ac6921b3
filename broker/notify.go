package broker

import "sync"

// notifier wakes every waiter when something changed (a partition's high
// watermark moved). Waiters take the channel, check their condition, and
// wait on the channel; Broadcast closes it and starts a new one.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func newNotifier() *notifier { return &notifier{ch: make(chan struct{})} }

// C returns the channel the next Broadcast closes.
func (n *notifier) C() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

// Broadcast wakes every waiter of the current channel.
func (n *notifier) Broadcast() {
	n.mu.Lock()
	close(n.ch)
	n.ch = make(chan struct{})
	n.mu.Unlock()
}
