package rules

import (
	"strconv"
	"strings"
)

// decimal is a JSON number exactly: digits × 10^exp, and its sign. It does
// what the rules need of numbers (jsonb's equality, numeric's text) without
// math/big, which would add about 40 KiB to the planner page's module.
type decimal struct {
	neg    bool
	digits string // no leading zero; "" for zero
	exp    int
}

// parseDecimal reads a JSON number (as encoding/json's Number holds one).
func parseDecimal(s string) (decimal, bool) {
	var d decimal
	d.neg = strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	whole, frac, _ := strings.Cut(mant, ".")
	if whole == "" || !allDigits(whole) || !allDigits(frac) {
		return d, false
	}
	if hasExp {
		e, err := strconv.Atoi(strings.TrimPrefix(exp, "+"))
		if err != nil {
			return d, false
		}
		d.exp = e
	}
	d.exp -= len(frac)
	d.digits = strings.TrimLeft(whole+frac, "0")
	return d, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func (d decimal) isZero() bool { return d.digits == "" }

// equal compares two numbers as numbers: 1.50 is 1.5e0, -0 is 0.
func (d decimal) equal(o decimal) bool {
	if d.isZero() || o.isZero() {
		return d.isZero() && o.isZero()
	}
	return d.neg == o.neg && d.normal() == o.normal()
}

// normal is d with its trailing zeros moved into the exponent, as text.
func (d decimal) normal() string {
	t := strings.TrimRight(d.digits, "0")
	return t + "e" + strconv.Itoa(d.exp+len(d.digits)-len(t))
}

// text prints d with scale digits after the point (d has no more), as
// numeric prints it: no sign on zero.
func (d decimal) text(scale int) string {
	var s string
	switch {
	case d.exp >= 0 && scale == 0:
		s = d.digits + strings.Repeat("0", d.exp)
		if d.isZero() {
			s = "0"
		}
	default:
		digits := d.digits + strings.Repeat("0", max(0, d.exp+scale))
		if len(digits) <= scale {
			digits = strings.Repeat("0", scale-len(digits)+1) + digits
		}
		s = digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	}
	if d.neg && !d.isZero() {
		s = "-" + s
	}
	return s
}
