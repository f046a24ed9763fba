package rules

import (
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// numericText and jsonEqual, without math/big, agree with math/big's exact
// rationals on hand-picked and random JSON numbers.
func TestDecimalAgreesWithBigRat(t *testing.T) {
	nums := []string{"0", "-0", "0.0", "-0.00", "0e5", "-0.0e1", "1", "-1", "15", "1.5e1", "1.50e1", "150e-1", "2e-3", "-2E-3", "1e+2",
		"12.3400", "0.001", "1e0", "123456789012345678901234567890", "1.23456789012345678901234567890e29", "7.0e-10", "5e3", "0.5E1"}
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		var b strings.Builder
		if r.IntN(3) == 0 {
			b.WriteString("-")
		}
		b.WriteString(strconv.Itoa(r.IntN(1000)))
		if r.IntN(2) == 0 {
			b.WriteString("." + strings.Repeat("0", r.IntN(3)) + strconv.Itoa(r.IntN(1000)))
		}
		if r.IntN(2) == 0 {
			b.WriteString("e" + strconv.Itoa(r.IntN(20)-10))
		}
		nums = append(nums, b.String())
	}
	bigText := func(s string) string { // the implementation before, with math/big
		mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
		rat, _ := new(big.Rat).SetString(s)
		if !hasExp {
			if rat.Sign() == 0 {
				return strings.TrimPrefix(s, "-")
			}
			return s
		}
		e, _ := strconv.Atoi(exp)
		_, frac, _ := strings.Cut(mant, ".")
		return rat.FloatString(max(0, len(frac)-e))
	}
	for _, s := range nums {
		if got, want := numericText(s), bigText(s); got != want {
			t.Errorf("numericText(%s) = %s, want %s", s, got, want)
		}
	}
	for i := 0; i+1 < len(nums); i++ {
		a, b := nums[i], nums[(i*7+3)%len(nums)]
		x, _ := new(big.Rat).SetString(a)
		y, _ := new(big.Rat).SetString(b)
		da, _ := parseDecimal(a)
		db, _ := parseDecimal(b)
		if da.equal(db) != (x.Cmp(y) == 0) || !da.equal(da) {
			t.Errorf("equal(%s, %s) = %v, want %v", a, b, da.equal(db), x.Cmp(y) == 0)
		}
	}
	for _, pair := range [][2]string{{"15", "1.5e1"}, {"1.50e1", "150e-1"}, {"0", "-0.00"}, {"0e5", "-0"}, {"1e2", "100.000"}, {"-2e-3", "-0.002"}} {
		a, _ := parseDecimal(pair[0])
		b, _ := parseDecimal(pair[1])
		if !a.equal(b) {
			t.Errorf("%s and %s are one number", pair[0], pair[1])
		}
	}
}
