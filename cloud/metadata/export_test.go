package metadata

// What the external tests (package metadata_test) call that nothing outside
// the package does.
var (
	GuestOSShortName = guestOSShortName
)
