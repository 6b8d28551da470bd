fn main() {
    println!("npagent");
}
