package tui

import "charm.land/lipgloss/v2"

// theme holds every style the dashboard uses. Colours are limited to the 16
// basic ANSI colours so a 16-colour terminal shows exactly what was meant;
// anything that must stay visible without colour (selection, active tab,
// errors) also carries an attribute (reverse, bold) that survives NO_COLOR,
// where Bubble Tea's renderer drops the colours and keeps the attributes.
type theme struct {
	title     lipgloss.Style // product name in the header
	header    lipgloss.Style // header line
	tab       lipgloss.Style
	tabActive lipgloss.Style
	colHeader lipgloss.Style // table column titles
	selected  lipgloss.Style // selected table row (focused table)
	selBlur   lipgloss.Style // selected row of a table without focus
	section   lipgloss.Style // section titles inside a view
	dim       lipgloss.Style
	label     lipgloss.Style
	ok        lipgloss.Style
	warn      lipgloss.Style
	err       lipgloss.Style
	spark     lipgloss.Style
	key       lipgloss.Style // key names in the footer and help
	box       lipgloss.Style // help overlay frame
}

func defaultTheme() *theme {
	return &theme{
		title:     lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Cyan),
		header:    lipgloss.NewStyle(),
		tab:       lipgloss.NewStyle(),
		tabActive: lipgloss.NewStyle().Reverse(true).Bold(true),
		colHeader: lipgloss.NewStyle().Bold(true),
		selected:  lipgloss.NewStyle().Reverse(true),
		selBlur:   lipgloss.NewStyle().Underline(true),
		section:   lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Cyan),
		dim:       lipgloss.NewStyle().Faint(true),
		label:     lipgloss.NewStyle().Faint(true),
		ok:        lipgloss.NewStyle().Foreground(lipgloss.Green),
		warn:      lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Yellow),
		err:       lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Red),
		spark:     lipgloss.NewStyle().Foreground(lipgloss.Green),
		key:       lipgloss.NewStyle().Bold(true),
		box:       lipgloss.NewStyle().Border(lipgloss.NormalBorder()).Padding(0, 1),
	}
}
