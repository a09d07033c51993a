package cli

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"strings"
)

// Shell completion comes from the command table itself, as help does:
// the scripts of `tenure completion` ask `tenure __complete WORD...` what
// to offer, and complete answers from each command's flag.FlagSet and
// words, walking the typed words by the rules Main parses them by (global
// flags before the command's name, "--" ends the flags, flags after
// positional arguments only where the command is interspersed).
//
// The answer is one line per candidate for the word being completed, the
// whole word, a tab and what it is ("--ttl\tthe lease's lifetime…"); or
// one line ":files" (":dirs") when the word is a path, which the shell
// completes itself, after the word's "--flag=" if it has one. An empty
// answer offers nothing (lease names, say: they live in the store).

// shells are the shells `tenure completion` writes a script for.
var shells = []string{"bash", "zsh", "fish"}

var (
	//go:embed completion.bash
	bashScript string
	//go:embed completion.zsh
	zshScript string
	//go:embed completion.fish
	fishScript string
)

// completeRequest is the hidden command the scripts run.
const completeRequest = "__complete"

// Lines of an answer that ask the shell to complete a path itself.
const (
	answerFiles = ":files"
	answerDirs  = ":dirs"
)

func completionCommand() *command {
	return &command{
		summary:  "print the shell completion script of bash, zsh or fish",
		synopsis: "completion bash|zsh|fish",
		about: `Completion prints a script that completes tenure's commands, their flags
and the fixed words some of them take (help's command names, completion's
shells, fence's reset, --log-format's json and text), and file names
where a path goes (run's command, --json FILE, docs' DIR), as you type, in
bash, zsh or fish. Lease names are not completed: they live in the store.

To load it into the current shell:
  bash:  source <(tenure completion bash)
  zsh:   source <(tenure completion zsh)
  fish:  tenure completion fish | source
To load it in every new shell, write it where the shell looks:
  bash:  tenure completion bash > ~/.local/share/bash-completion/completions/tenure
  zsh:   tenure completion zsh > "${fpath[1]}/_tenure"
  fish:  tenure completion fish > ~/.config/fish/completions/tenure.fish
The bash script needs the bash-completion package (most distributions
install it with bash; on macOS: brew install bash-completion@2), the zsh
one compinit (autoload -U compinit && compinit). The scripts ask tenure
itself what to offer (tenure __complete WORDS…), so they follow the
installed tenure's commands and flags.`,
		words: func() []string { return shells },
		setup: func(fs *flag.FlagSet) action {
			return func(_ context.Context, e *env, args []string) error {
				if len(args) != 1 {
					return usagef("completion", "takes one shell, %s; got %d arguments", strings.Join(shells, ", "), len(args))
				}
				scripts := map[string]string{"bash": bashScript, "zsh": zshScript, "fish": fishScript}
				script, ok := scripts[args[0]]
				if !ok {
					return usagef("completion", "unknown shell %q; the shells are %s", args[0], strings.Join(shells, ", "))
				}
				_, err := fmt.Fprint(e.stdout, script)
				return err
			}
		},
	}
}

func completeRequestCommand() *command {
	return &command{
		summary:  "answer a shell completion script's request (internal)",
		synopsis: completeRequest + " [WORD...]",
		about: `The completion scripts of tenure completion run this command with the
words typed so far after "tenure", the last one the word being completed;
it prints the candidates for that word, one a line with a tab and what it
is, or the line :files or :dirs when the word is a path.`,
		raw:    true,
		hidden: true,
		setup: func(*flag.FlagSet) action {
			return func(_ context.Context, e *env, args []string) error {
				if len(args) == 0 {
					args = []string{""}
				}
				_, err := fmt.Fprint(e.stdout, complete(args))
				return err
			}
		},
	}
}

// complete answers for the last of words, the words typed after "tenure".
func complete(words []string) string {
	typed, word := words[:len(words)-1], words[len(words)-1]
	globals := flag.NewFlagSet("tenure", flag.ContinueOnError)
	new(globalFlags).define(globals)
	n := 0
	for n < len(typed) && strings.HasPrefix(typed[n], "-") {
		name, _, hasValue := strings.Cut(strings.TrimLeft(typed[n], "-"), "=")
		f := globals.Lookup(name)
		if f == nil {
			return ""
		}
		n++
		if !hasValue && !isBoolFlag(f) {
			if n == len(typed) {
				return completeValue(f, "", word)
			}
			n++
		}
	}
	if n == len(typed) {
		if strings.HasPrefix(word, "-") {
			return completeFlags(globals, word, "--help", "--version")
		}
		return completeCommands(word)
	}
	cmd, ok := commandTable()[typed[n]]
	if !ok || cmd.hidden || cmd.raw {
		return ""
	}
	fs := flag.NewFlagSet(typed[n], flag.ContinueOnError)
	cmd.setup(fs)
	new(globalFlags).define(fs)
	at := locate(fs, typed[n+1:], cmd.interspersed)
	switch {
	case at.value != nil:
		return completeValue(at.value, "", word)
	case at.flags && strings.HasPrefix(word, "-"):
		return completeFlags(fs, word, "--help")
	case at.operand == 0 && cmd.words != nil:
		return candidates(cmd.words(), nil, "", word)
	case cmd.files:
		return answerFiles + "\n"
	}
	return ""
}

// position is where the word being completed stands among a command's
// arguments.
type position struct {
	value   *flag.Flag // the flag the word is the value of, or nil
	flags   bool       // whether flags may still come
	operand int        // the positional arguments before the word
}

// locate reads args, the words before the one being completed, as
// parseArgs and singleDash do, and says where the next word stands.
func locate(fs *flag.FlagSet, args []string, interspersed bool) position {
	at := position{flags: true}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if at.flags && arg == "--" {
			at.flags = false
			continue
		}
		if at.flags && len(arg) > 1 && arg[0] == '-' {
			name, _, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
			if f := fs.Lookup(name); f != nil && !hasValue && !isBoolFlag(f) {
				if i == len(args)-1 {
					at.value = f
					return at
				}
				i++
			}
			continue
		}
		at.operand++
		if !interspersed {
			at.flags = false
		}
	}
	return at
}

// completeFlags answers for word, a flag or a flag with its value
// (--log-format=j), from the flags of fs and the extra flags more.
func completeFlags(fs *flag.FlagSet, word string, more ...string) string {
	if name, value, ok := strings.Cut(word, "="); ok {
		f := fs.Lookup(strings.TrimLeft(name, "-"))
		if f == nil || isBoolFlag(f) {
			return ""
		}
		return completeValue(f, name+"=", value)
	}
	var names, usages []string
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Usage, hiddenFlag) {
			return
		}
		_, usage := flag.UnquoteUsage(f)
		names = append(names, flagSpelling(f.Name))
		usages = append(usages, usage)
	})
	for _, m := range more {
		names = append(names, m)
		usages = append(usages, "")
	}
	return candidates(names, usages, "", word)
}

// flagSpelling is the flag name as the documentation writes it: -v for a
// one-letter flag, --name for the others.
func flagSpelling(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// completeValue answers for value, the value of f, typed after prefix:
// f's words, or a path when f's argument is a FILE, PATH or DIR.
func completeValue(f *flag.Flag, prefix, value string) string {
	if w, ok := f.Value.(wordsValue); ok {
		return candidates(w.Words(), nil, prefix, value)
	}
	switch arg, _ := flag.UnquoteUsage(f); arg {
	case "FILE", "PATH":
		return answerFiles + "\n"
	case "DIR":
		return answerDirs + "\n"
	}
	return ""
}

// wordsValue is a flag value that is one of a few fixed words, which
// completion offers.
type wordsValue interface {
	flag.Value
	Words() []string
}

// completeCommands answers for word, a command's name.
func completeCommands(word string) string {
	names := commandNames()
	summaries := make([]string, len(names))
	table := commandTable()
	for i, n := range names {
		summaries[i] = table[n].summary
	}
	return candidates(names, summaries, "", word)
}

// candidates renders the words that begin with typed, each after prefix
// and with its description (descs may be nil), one a line.
func candidates(words, descs []string, prefix, typed string) string {
	var b strings.Builder
	for i, w := range words {
		if !strings.HasPrefix(w, typed) {
			continue
		}
		b.WriteString(prefix + w)
		if descs != nil && descs[i] != "" {
			b.WriteString("\t" + strings.Join(strings.Fields(descs[i]), " "))
		}
		b.WriteString("\n")
	}
	return b.String()
}
