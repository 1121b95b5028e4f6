//! `mcpwire_tests::test_server_binary` finds the binary that cargo built.

#[test]
fn test_server_binary_is_found() {
    if std::env::var_os("MCPWIRE_TEST_SERVER").is_some() {
        return;
    }
    let found = mcpwire_tests::test_server_binary();
    assert_eq!(
        found,
        std::path::Path::new(env!("CARGO_BIN_EXE_mcpwire-test-server"))
    );
}
