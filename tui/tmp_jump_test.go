package tui

import (
	"fmt"
	"testing"
)

func TestTmpJump(t *testing.T) {
	r := demoRunner(t, 80, 24)
	r.keys(":")
	r.typeText("records orders")
	r.keys("enter")
	r.until("records", func() bool { return len(r.m.records.recs) == 3 })
	r.keys("o")
	fmt.Println(r.screen())
	r.keys("esc", ":")
	fmt.Println(r.screen())
}
