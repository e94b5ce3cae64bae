package tui

import "charm.land/bubbles/v2/key"

// keyMap is every binding of the dashboard, in the k9s / lazygit tradition.
// Views pick the bindings they use for the footer; the help overlay lists
// them all.
type keyMap struct {
	// global
	Quit     key.Binding
	Help     key.Binding
	Command  key.Binding
	Filter   key.Binding
	Refresh  key.Binding
	Back     key.Binding
	Overview key.Binding
	Topics   key.Binding
	Groups   key.Binding
	Records  key.Binding

	// lists
	Up       key.Binding
	Down     key.Binding
	PageUp   key.Binding
	PageDown key.Binding
	Top      key.Binding
	Bottom   key.Binding
	Open     key.Binding
	Sort     key.Binding
	Reverse  key.Binding
	Focus    key.Binding
	Tail     key.Binding

	// records
	Jump   key.Binding
	Follow key.Binding
}

func defaultKeys() *keyMap {
	b := func(keys []string, help, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
	}
	return &keyMap{
		Quit:     b([]string{"q", "ctrl+c"}, "q", "quit"),
		Help:     b([]string{"?"}, "?", "help"),
		Command:  b([]string{":"}, ":", "go to view"),
		Filter:   b([]string{"/"}, "/", "filter"),
		Refresh:  b([]string{"r", "ctrl+r"}, "r", "refresh now"),
		Back:     b([]string{"esc"}, "esc", "back"),
		Overview: b([]string{"1"}, "1", "overview"),
		Topics:   b([]string{"2"}, "2", "topics"),
		Groups:   b([]string{"3"}, "3", "groups"),
		Records:  b([]string{"4"}, "4", "records"),

		Up:       b([]string{"up", "k"}, "↑/k", "up"),
		Down:     b([]string{"down", "j"}, "↓/j", "down"),
		PageUp:   b([]string{"pgup", "ctrl+b", "ctrl+u"}, "pgup", "page up"),
		PageDown: b([]string{"pgdown", "ctrl+f", "ctrl+d", "space"}, "pgdn", "page down"),
		Top:      b([]string{"home", "g"}, "g", "first"),
		Bottom:   b([]string{"end", "G"}, "G", "last / follow"),
		Open:     b([]string{"enter"}, "enter", "open"),
		Sort:     b([]string{"s"}, "s", "sort column"),
		Reverse:  b([]string{"S"}, "S", "reverse sort"),
		Focus:    b([]string{"tab", "shift+tab"}, "tab", "switch pane"),
		Tail:     b([]string{"t"}, "t", "tail records"),

		Jump:   b([]string{"o"}, "o", "jump to offset/time"),
		Follow: b([]string{"f"}, "f", "follow live"),
	}
}

// helpGroups is the content of the help overlay: titled columns of keys.
func (k *keyMap) helpGroups() []helpGroup {
	return []helpGroup{
		{"Global", []key.Binding{k.Overview, k.Topics, k.Groups, k.Records, k.Command, k.Refresh, k.Help, k.Back, k.Quit}},
		{"Lists", []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom, k.Open, k.Filter, k.Sort, k.Reverse, k.Focus, k.Tail}},
		{"Records", []key.Binding{k.Open, k.Jump, k.Follow, k.Bottom, k.Filter}},
	}
}

type helpGroup struct {
	title    string
	bindings []key.Binding
}
