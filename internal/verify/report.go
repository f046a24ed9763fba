package verify

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// WriteTable writes the guard found and one block per check.
func (r *Report) WriteTable(w io.Writer) error {
	g := r.Guard
	var b strings.Builder
	where := "on " + g.EventsTable
	if g.Keysvc {
		where = "through keysvc"
	}
	fmt.Fprintf(&b, "workflow %q: Webhook %q (POST /webhook/%s) → reservation %q %s", r.Workflow, g.Webhook, g.Path, g.Reserve, where)
	if g.Transactional {
		b.WriteString(", the business write in the same statement")
	} else {
		fmt.Fprintf(&b, " → decision %q", g.Decision)
	}
	if biz := g.Business(); len(biz) > 0 {
		fmt.Fprintf(&b, " → business branch %s", strings.Join(biz, ", "))
	}
	if len(g.SubWorkflowCalls) > 0 {
		fmt.Fprintf(&b, "\n(stand-ins for %s: the workflows they call are not deployed here)", strings.Join(g.SubWorkflowCalls, ", "))
	}
	b.WriteString("\n\n")
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "%-4s  %s (%.1fs)\n", c.Status, c.Name, c.Duration.Seconds())
		for _, line := range strings.Split(c.Seen, "\n") {
			fmt.Fprintf(&b, "      %s\n", line)
		}
	}
	failed, skipped := 0, 0
	for _, c := range r.Checks {
		switch c.Status {
		case Fail:
			failed++
		case Skip:
			skipped++
		}
	}
	fmt.Fprintf(&b, "\n%d checks: %d passed, %d failed, %d skipped\n", len(r.Checks), len(r.Checks)-failed-skipped, failed, skipped)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJUnit writes the checks as a JUnit XML test suite, one test case
// per check, for CI systems to show.
func (r *Report) WriteJUnit(w io.Writer) error {
	return WriteJUnit(w, "idemhook verify: "+r.Workflow, "idemhook.verify", r.Checks)
}

// WriteJUnit writes checks as the JUnit XML test suite called suite, one
// test case of class class per check; `idemhook rules test` writes its
// samples' results with it too.
func WriteJUnit(w io.Writer, suite, class string, checks []Check) error {
	type result struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	}
	type testcase struct {
		Name      string  `xml:"name,attr"`
		ClassName string  `xml:"classname,attr"`
		Time      string  `xml:"time,attr"`
		Failure   *result `xml:"failure,omitempty"`
		Skipped   *result `xml:"skipped,omitempty"`
		SystemOut string  `xml:"system-out,omitempty"`
	}
	doc := struct {
		XMLName  xml.Name   `xml:"testsuite"`
		Name     string     `xml:"name,attr"`
		Tests    int        `xml:"tests,attr"`
		Failures int        `xml:"failures,attr"`
		Skipped  int        `xml:"skipped,attr"`
		Cases    []testcase `xml:"testcase"`
	}{Name: suite, Tests: len(checks)}
	for _, c := range checks {
		tc := testcase{Name: c.Name, ClassName: class, Time: fmt.Sprintf("%.3f", c.Duration.Seconds()), SystemOut: c.Seen}
		switch c.Status {
		case Fail:
			doc.Failures++
			tc.Failure = &result{Message: firstLine(c.Seen), Text: c.Seen}
		case Skip:
			doc.Skipped++
			tc.Skipped = &result{Message: firstLine(c.Seen)}
		}
		doc.Cases = append(doc.Cases, tc)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
