package storagetest

import (
	"bytes"
	"regexp"
	"testing"
)

func TestRunPattern(t *testing.T) {
	cases := []struct{ name, want string }{
		{"TestStorage", `^TestStorage$`},
		{"TestX/sub_case", `^TestX$/^sub_case$`},
		{"TestX/a+b(1)", `^TestX$/^a\+b\(1\)$`},
	}
	for _, c := range cases {
		got := runPattern(c.name)
		if got != c.want {
			t.Errorf("runPattern(%q) = %q, want %q", c.name, got, c.want)
		}
		for _, part := range regexp.MustCompile(`\$/\^`).Split(got, -1) {
			if _, err := regexp.Compile(part); err != nil {
				t.Errorf("runPattern(%q): %v", c.name, err)
			}
		}
	}
}

func TestRacerDataDiffers(t *testing.T) {
	a, b := racerData("k", 0, 100), racerData("k", 1, 100)
	if bytes.Equal(a, b) || len(a) != 100 {
		t.Fatal("two racers would write the same bytes: the winner could not be told apart")
	}
	if !bytes.Equal(a, racerData("k", 0, 100)) {
		t.Fatal("racerData is not deterministic")
	}
}
