//! The `wiregate` command line.

fn main() {
    eprintln!("wiregate: the server arrives with the gateway issue");
}
