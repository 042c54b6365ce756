fn main() {
    println!("nccl-wrap");
}
