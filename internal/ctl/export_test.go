package ctl

import (
	"flag"
	"strings"
)

// A Command is one entry of the command table as the tests walk it.
type Command struct {
	Path    []string // "cdc", "enable"
	Group   bool
	Flags   []string // its flags' names (a group: none)
	Example string   // its example (a group: none)
}

// Commands are every command and group of the table, groups before their subcommands.
func Commands() []Command {
	var out []Command
	var walk func(cs []command, path []string)
	walk = func(cs []command, path []string) {
		for _, c := range cs {
			p := append(append([]string(nil), path...), c.name)
			if c.subs != nil {
				out = append(out, Command{Path: p, Group: true})
				walk(c.subs, p)
				continue
			}
			fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
			c.flags(fs)
			var flags []string
			fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f.Name) })
			out = append(out, Command{Path: p, Flags: flags, Example: c.example})
		}
	}
	walk(commands, nil)
	return out
}

// ParseExample parses a command's example line as Run would, without running it.
func ParseExample(line string) error {
	words := strings.Fields(line)[1:] // after pollerctl
	c, path, args, err := find(words)
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	c.flags(fs)
	_, err = parse(fs, args)
	return err
}
