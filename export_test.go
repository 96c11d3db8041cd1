package polygateway

// RepairJSON is repairJSON, for the tests of package polygateway_test.
var RepairJSON = repairJSON
