package stream

import "testing"

func TestRequestStatsAddSub(t *testing.T) {
	a := RequestStats{Puts: 5, Gets: 7, Heads: 1, Lists: 2, Deletes: 3, BytesWritten: 100, BytesRead: 50, Retries: 4, Errors: 1}
	b := RequestStats{Puts: 1, Gets: 2, Heads: 3, Lists: 4, Deletes: 5, BytesWritten: 6, BytesRead: 7, Retries: 8, Errors: 9}
	sum := a.Add(b)
	want := RequestStats{Puts: 6, Gets: 9, Heads: 4, Lists: 6, Deletes: 8, BytesWritten: 106, BytesRead: 57, Retries: 12, Errors: 10}
	if sum != want {
		t.Fatalf("Add = %+v, want %+v", sum, want)
	}
	if got := sum.Sub(b); got != a {
		t.Fatalf("Sub = %+v, want %+v", got, a)
	}
}
