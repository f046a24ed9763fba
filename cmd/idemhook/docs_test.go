package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/idemhook/idemhook/internal/generator"
)

// The docs are README.md and docs/*.md, from the module root.
func docFiles(t *testing.T) map[string]string {
	t.Helper()
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md")
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel("../..", f)
		out[filepath.ToSlash(rel)] = string(b)
	}
	return out
}

var (
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading  = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	codeSpan   = regexp.MustCompile("(?s)```.*?```|`[^`\n]+`")
	flagToken  = regexp.MustCompile(`(?:^|[\s\[(|=])(--[a-z][a-z0-9-]+)`)
	commandUse = regexp.MustCompile(`\bidemhook ([a-z]+)\b`)
)

// anchors lists the anchors GitHub gives a markdown file's headings.
func anchors(markdown string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(markdown, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		m := mdHeading.FindStringSubmatch(line)
		if inFence || m == nil {
			continue
		}
		slug := slugify(m[1])
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// slugify is GitHub's heading anchor: lower case, punctuation dropped,
// spaces as hyphens.
func slugify(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 0x7f && r != '–' && r != '—' && r != '…' && r != '→':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// brokenLinks lists the relative links of docs (file → markdown) to a file
// or an anchor that is not there.
func brokenLinks(docs map[string]string, exists func(path string) bool) []string {
	var out []string
	for file, text := range docs {
		prose := codeSpan.ReplaceAllString(text, "")
		for _, m := range mdLink.FindAllStringSubmatch(prose, -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(link, "#")
			target := file
			if path != "" {
				target = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(file), path)))
				if !exists(target) {
					out = append(out, fmt.Sprintf("%s: %s: no such file", file, link))
					continue
				}
			}
			if anchor == "" {
				continue
			}
			body, ok := docs[target]
			if !ok {
				continue // an anchor into a file that is not markdown (a line of code)
			}
			if !anchors(body)[anchor] {
				out = append(out, fmt.Sprintf("%s: %s: no heading %q in %s", file, link, anchor, target))
			}
		}
	}
	slices.Sort(out)
	return out
}

// Every relative link of the docs reaches a file and an anchor that exist,
// and so does every docs link in a generated workflow's notes.
func TestDocsLinksResolve(t *testing.T) {
	docs := docFiles(t)
	exists := func(p string) bool { _, err := os.Stat(filepath.Join("../..", p)); return err == nil }
	for _, b := range brokenLinks(docs, exists) {
		t.Error(b)
	}
	// The notes point at the docs on GitHub: the same pages and anchors.
	prefix := regexp.QuoteMeta(generator.Docs)
	noteLink := regexp.MustCompile(prefix + `([a-z0-9-]+\.md)(?:#([a-z0-9-]+))?`)
	for _, tpl := range generator.Templates() {
		files, err := generator.Files(tpl.Options)
		if err != nil {
			t.Fatal(err)
		}
		for name, raw := range files {
			for _, m := range noteLink.FindAllStringSubmatch(string(raw), -1) {
				page, ok := docs["docs/"+m[1]]
				if !ok {
					t.Errorf("%s/%s: a note links to docs/%s, which is not there", tpl.Name, name, m[1])
				} else if m[2] != "" && !anchors(page)[m[2]] {
					t.Errorf("%s/%s: a note links to docs/%s#%s, which has no such heading", tpl.Name, name, m[1], m[2])
				}
			}
		}
	}
}

// The check itself fails on a link or an anchor that points nowhere.
func TestBrokenLinksAreFound(t *testing.T) {
	docs := map[string]string{
		"README.md":     "See [modes](docs/modes.md#lease), [gone](docs/gone.md), [here](#setup) and [there](#nowhere).\n\n## Setup\n",
		"docs/modes.md": "# Modes\n\n## Lease\n",
	}
	exists := func(p string) bool { _, ok := docs[p]; return ok }
	got := brokenLinks(docs, exists)
	want := []string{`README.md: #nowhere: no heading "nowhere" in README.md`, "README.md: docs/gone.md: no such file"}
	if !slices.Equal(got, want) {
		t.Errorf("broken links %q, want %q", got, want)
	}
	if a := anchors("## The inbox pattern: receipt is not effect\n## `--guard` and you\n"); !a["the-inbox-pattern-receipt-is-not-effect"] || !a["--guard-and-you"] {
		t.Errorf("anchors %v", a)
	}
}

// flagsOf lists the flags `idemhook cmd --help` prints.
func flagsOf(t *testing.T, cmd string) []string {
	t.Helper()
	code, stdout, _ := runCLI("", cmd, "--help")
	if code != 0 {
		return nil
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(stdout, -1) {
		out = append(out, "--"+m[1])
	}
	if out != nil {
		out = append(out, "--help") // it just answered it; nil stays nil: a command of subcommands is not checked
	}
	return out
}

// Every flag the docs give a command is one the command has: a flag that
// was renamed or removed fails here, where the docs still name it.
func TestDocsNameOnlyFlagsTheCLIHas(t *testing.T) {
	commands := map[string][]string{}
	for _, c := range []string{"generate", "schema", "key", "planner", "deploy", "check", "cleanup", "up", "verify", "guard", "bench", "rules"} {
		commands[c] = flagsOf(t, c)
	}
	out, err := exec.Command("go", "run", "../keysvc", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("keysvc --help: %v\n%s", err, out)
	}
	keysvcFlags := []string{"--help"}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllSubmatch(out, -1) {
		keysvcFlags = append(keysvcFlags, "--"+string(m[1]))
	}
	for file, text := range docFiles(t) {
		for _, span := range codeSpan.FindAllString(text, -1) {
			for _, line := range strings.Split(strings.Trim(span, "`"), "\n") { // a span's own backticks are not what precedes a flag
				check := func(have []string, who string, from string) {
					for _, m := range flagToken.FindAllStringSubmatch(from, -1) {
						if !slices.Contains(have, m[1]) {
							t.Errorf("%s: %q names %s, which %s does not have", file, strings.TrimSpace(line), m[1], who)
						}
					}
				}
				if m := commandUse.FindStringSubmatchIndex(line); m != nil {
					name := line[m[2]:m[3]]
					if flags, ok := commands[name]; ok && flags != nil {
						rest := line[m[1]:]
						if i := strings.IndexAny(rest, "|;&"); i >= 0 {
							rest = rest[:i] // a pipe or another command
						}
						check(flags, "idemhook "+name, rest)
					}
					continue
				}
				if i := strings.Index(line, "keysvc "); i >= 0 && !strings.Contains(line, "cmd/keysvc") || strings.HasPrefix(strings.Trim(line, "`"), "--") && file == "docs/keysvc.md" {
					rest := line
					if i >= 0 {
						rest = line[i:]
					}
					if j := strings.IndexAny(rest, "|;&"); j >= 0 {
						rest = rest[:j]
					}
					check(keysvcFlags, "keysvc", rest)
				}
			}
		}
	}

}

// The README's Layout names folders and files that exist, where they are.
func TestReadmeLayoutNamesWhatExists(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## Layout\n\n```\n")
	block, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("the README has no Layout block")
	}
	named := 0
	for _, line := range strings.Split(block, "\n") {
		if line == "" || line[0] == ' ' {
			continue // a description's second line
		}
		path := strings.Fields(line)[0]
		named++
		if _, err := os.Stat(filepath.Join("..", "..", filepath.FromSlash(path))); err != nil {
			t.Errorf("the README's Layout names %s, which does not exist: %v", path, err)
		}
	}
	if named < 20 {
		t.Errorf("the Layout names %d paths; the block was not read", named)
	}
}
