package source

import "github.com/pseudotrigger/pseudotrigger/internal/source/sourcedef"

// The names below are package sourcedef's, under which the drivers and the runtime knew them
// before it was cut out of this package; they go once their users name package sourcedef.

type (
	Definition = sourcedef.Definition
	TableDef   = sourcedef.TableDef
	Cursor     = sourcedef.Cursor
	Table      = sourcedef.Table
	FieldError = sourcedef.FieldError
)

const (
	DefaultSettleLag  = sourcedef.DefaultSettleLag
	NoSettleLag       = sourcedef.NoSettleLag
	AllColumns        = sourcedef.AllColumns
	InitialNow        = sourcedef.InitialNow
	InitialSnapshot   = sourcedef.InitialSnapshot
	FieldTable        = sourcedef.FieldTable
	FieldSchema       = sourcedef.FieldSchema
	FieldColumns      = sourcedef.FieldColumns
	FieldKey          = sourcedef.FieldKey
	FieldFilter       = sourcedef.FieldFilter
	FieldCursorKind   = sourcedef.FieldCursorKind
	FieldCursorColumn = sourcedef.FieldCursorColumn
	FieldInitial      = sourcedef.FieldInitial
	FieldSkipWriter   = sourcedef.FieldSkipWriter
	FieldTables       = sourcedef.FieldTables
	FieldSlot         = sourcedef.FieldSlot
	FieldPublication  = sourcedef.FieldPublication
)

var (
	ErrDefinition = sourcedef.ErrDefinition
	ErrMissing    = sourcedef.ErrMissing
	CheckWriter   = sourcedef.CheckWriter
	FieldErrors   = sourcedef.FieldErrors
)
