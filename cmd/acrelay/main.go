// Command acrelay is the relay server and the agent toolkit for
// agent-correspondence/v0.1. Each subcommand lives in its own file and
// registers itself on rootCmd in an init function.
package main

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

var rootCmd = &cobra.Command{
	Use:           "acrelay",
	Short:         "Federated relay and agent toolkit for agent-correspondence/v0.1",
	SilenceUsage:  true,
	SilenceErrors: true,
	// Before any command runs, so nothing has started when a value is refused.
	PersistentPreRunE: applyEnv,
}

// exitError carries a process exit status out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func main() {
	rejectUnknownSubcommands(rootCmd)
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "acrelay:", errorText(err))
		if ee, ok := err.(*exitError); ok {
			os.Exit(ee.code)
		}
		os.Exit(1)
	}
}

// rejectUnknownSubcommands makes every command group below root (project,
// identity, conformance, …) refuse an argument that names none of its
// subcommands. Cobra checks this only for the root: a group without a Run
// of its own prints its help and exits 0 for "acrelay project lsit", so a
// script's typo passes silently. A group given no argument still prints
// its help. It runs from main, after every file's init has registered its
// commands.
func rejectUnknownSubcommands(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.HasSubCommands() && !sub.Runnable() {
				sub.Args = cobra.ArbitraryArgs
				if sub.SuggestionsMinimumDistance <= 0 {
					sub.SuggestionsMinimumDistance = 2 // cobra's default, set only on the root
				}
				sub.RunE = func(cmd *cobra.Command, args []string) error {
					if len(args) == 0 {
						return cmd.Help()
					}
					msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
					if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
						msg += "; did you mean " + strings.Join(s, " or ") + "?"
					}
					return fmt.Errorf("%s (see %s --help)", msg, cmd.CommandPath())
				}
			}
			walk(sub)
		}
	}
	walk(root)
}

// tokenSecret matches the secret part of anything shaped like an acrelay
// token (internal/token: "acr_" + 26-character id + "_" + 43 characters),
// in any case, wherever it appears.
var tokenSecret = regexp.MustCompile(`(?i)(acr_[a-z2-7]{26}_)[A-Za-z0-9_-]{43}`)

// errorText is err's message as printed on the terminal: token secrets
// replaced by "<redacted>" (an error may quote an argument, and pflag
// quotes an unknown flag, in which a token was pasted by mistake), and
// control characters and invalid UTF-8 escaped, so that no message can
// move the cursor or set a terminal's title or clipboard.
func errorText(err error) string {
	msg := tokenSecret.ReplaceAllString(err.Error(), "${1}<redacted>")
	var b strings.Builder
	for len(msg) > 0 {
		r, size := utf8.DecodeRuneInString(msg)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, msg[0])
		case unicode.IsControl(r) && r != '\n' && r != '\t':
			q := strconv.QuoteRune(r) // '\x1b', '\u0085'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(msg[:size])
		}
		msg = msg[size:]
	}
	return b.String()
}

// envOr returns the environment variable's value, or def when it is unset
// or empty (as for the numbers and durations applyEnv sets: an empty
// ACRELAY_ADDR must not mean "listen on every interface").
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Annotations on flags that take their value from an environment variable
// when the command line does not set them (flag > ACRELAY_* > default).
const (
	envAnnotation       = "acrelay_env"
	secretEnvAnnotation = "acrelay_secret_env"
)

// bindEnv lets cmd's flag name take the value of the environment variable
// env. applyEnv parses it with the flag's own parser, so a value the flag
// cannot take is an error naming env, not a silent default. The error
// quotes the value: secrets use bindSecretEnv.
func bindEnv(cmd *cobra.Command, name, env string) {
	annotateFlag(cmd, name, envAnnotation, env)
}

// bindSecretEnv is bindEnv for a secret read with secretFromEnv (env or
// env_FILE); its errors name the variable and never quote the value.
func bindSecretEnv(cmd *cobra.Command, name, env string) {
	annotateFlag(cmd, name, secretEnvAnnotation, env)
}

func annotateFlag(cmd *cobra.Command, name, key, env string) {
	if err := cmd.Flags().SetAnnotation(name, key, []string{env}); err != nil {
		panic(fmt.Sprintf("bind %s to --%s: %v", env, name, err))
	}
}

// applyEnv sets each flag of cmd that is bound to an environment variable
// and not given on the command line from that variable; an empty variable
// counts as unset. It is rootCmd's PersistentPreRunE.
func applyEnv(cmd *cobra.Command, _ []string) error {
	if cmd.Flags().Lookup(configFlag) != nil {
		return applyConfig(cmd) // the environment and --config (config.go)
	}
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		if env := f.Annotations[envAnnotation]; len(env) == 1 {
			if v := os.Getenv(env[0]); v != "" && f.Value.Set(v) != nil {
				err = fmt.Errorf("%s %q: want %s", env[0], v, wantValue(f))
			}
		}
		if env := f.Annotations[secretEnvAnnotation]; len(env) == 1 {
			v, serr := secretFromEnv(env[0])
			switch {
			case serr != nil:
				err = serr
			case v != "" && f.Value.Set(v) != nil:
				err = fmt.Errorf("%s: want %s", env[0], wantValue(f))
			}
		}
	})
	return err
}

// wantValue says what a flag's parser takes, for applyEnv's errors.
func wantValue(f *pflag.Flag) string {
	switch f.Value.Type() {
	case "int", "int64":
		return "an integer"
	case "duration":
		return "a Go duration such as " + f.DefValue
	}
	if _, ok := f.Value.(pflag.SliceValue); ok {
		return "a comma-separated list of strings (in --config, also a YAML list)"
	}
	return "a " + f.Value.Type()
}
