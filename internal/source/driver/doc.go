// Package driver is the contract between package source, the portable reader of a poller's
// table, and each database: the Driver interface every database implements in a package of its
// own (postgres, mysql, sqlserver, sqlite; package drivers lists them), the ChangeStream a
// driver reads its database's record of changes with, through the Layout of the source that
// package source's Open found, and what they report (Stats, Detail) and administer (CDCSetup).
//
// Every capability is a method of Driver, as in go-cloud's blob/driver and River's riverdriver:
// what only some databases have, the others answer through Defaults (and StreamDefaults) with
// ErrNotSupported or a neutral answer, so that nothing asks a driver what it is. The package
// imports none of package source: a fifth database imports this package, the leaf packages row,
// sourcedef and setup, and package source only for its helpers (Collect, Connect) and its
// errors; it is registered in package drivers and passes the conformance suite of package
// sourcetest.
package driver
