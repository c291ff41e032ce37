package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestExamplesParse: every "acrelay …" line of every --help example names
// a command, flags it has (with their values), every flag it requires and
// arguments it accepts ("..." elides the rest). It reads the flag definitions only, so rootCmd's
// shared flag values are left alone.
func TestExamplesParse(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, line := range exampleLines(c.Example) {
			if err := checkExample(line); err != nil {
				t.Errorf("%s --help: example %q: %v", c.CommandPath(), line, err)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(rootCmd)
}

// exampleLines are the command lines of an example that run acrelay:
// continuation lines joined, comments, pipes and redirections cut, and
// $(…) substitutions and leading VAR=value assignments left out.
func exampleLines(example string) [][]string {
	var out [][]string
	joined := strings.ReplaceAll(example, "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		words := shellWords(line)
		for len(words) > 0 && (words[0] == "$" || strings.Contains(words[0], "=") && !strings.HasPrefix(words[0], "-")) {
			words = words[1:]
		}
		if len(words) == 0 || words[0] != "acrelay" {
			continue
		}
		out = append(out, words[1:])
	}
	return out
}

// shellWords splits a line into words the way sh would for these
// examples: quotes group, "#" starts a comment, |, <, > and ; end the
// command, and "$(…)" is one opaque word.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord, quote, depth := false, rune(0), 0
	flush := func() {
		if inWord {
			words = append(words, cur.String())
		}
		cur.Reset()
		inWord = false
	}
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case depth > 0:
			if r == '(' {
				depth++
			} else if r == ')' {
				depth--
			}
		case r == '$' && i+1 < len(rs) && rs[i+1] == '(':
			depth, inWord = 1, true
			cur.WriteString("SUBST")
			i++
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			flush()
		case r == '#' && !inWord, r == '|', r == '<', r == '>', r == ';', r == '&':
			flush()
			return words
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	flush()
	return words
}

func checkExample(args []string) error {
	cmd, rest, err := rootCmd.Find(args)
	if err != nil {
		return err
	}
	cmd.InitDefaultHelpFlag()
	cmd.InitDefaultVersionFlag() // --version, on the root only
	lookup := func(name string, short bool) *pflag.Flag {
		for _, fs := range []*pflag.FlagSet{cmd.Flags(), cmd.InheritedFlags()} {
			if short {
				if f := fs.ShorthandLookup(name); f != nil {
					return f
				}
			} else if f := fs.Lookup(name); f != nil {
				return f
			}
		}
		return nil
	}
	seen := map[string]bool{}
	var positional []string
	for i := 0; i < len(rest); i++ {
		w := rest[i]
		if w == "..." { // "and the flags you need": nothing more to check
			return nil
		}
		if !strings.HasPrefix(w, "-") || w == "-" {
			positional = append(positional, w)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
		f := lookup(name, !strings.HasPrefix(w, "--"))
		if f == nil {
			return fmt.Errorf("unknown flag %s", w)
		}
		seen[f.Name] = true
		if !hasValue && f.NoOptDefVal == "" {
			if i++; i == len(rest) {
				return fmt.Errorf("flag %s needs a value", w)
			}
		}
	}
	var missing []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if req := f.Annotations[cobra.BashCompOneRequiredFlag]; len(req) == 1 && req[0] == "true" && !seen[f.Name] {
			missing = append(missing, "--"+f.Name)
		}
	})
	if len(missing) > 0 {
		return fmt.Errorf("required flags missing: %s", strings.Join(missing, ", "))
	}
	if cmd.Args != nil {
		return cmd.Args(cmd, positional)
	}
	return nil
}
