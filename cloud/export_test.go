package cloud

// What the external tests (package cloud_test) call that nothing outside
// the package does.
var (
	NodeAddresses    = selectAddresses
	GuestOSShortName = guestOSShortName
)
