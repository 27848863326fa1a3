//! put / get / atomics between the ranks of a job: run with
//! `mwrun -n 4 target/release/examples/hello_rma`.
use memwire::{Access, Endpoint};

fn main() -> memwire::Result<()> {
    let ep = Endpoint::init()?;
    run(&ep)?;
    ep.finalize()
}

fn run(ep: &Endpoint) -> memwire::Result<()> {
    let (me, n) = (ep.rank(), ep.size());
    // Word 0: a counter on rank 0; then one 8-byte slot per rank.
    let region = ep.alloc_symmetric(8 + 8 * n as usize, Access::ALL)?;
    let key = region.key();
    let right = (me + 1) % n;
    let slot = 8 + 8 * u64::from(me);
    ep.put(right, key, slot, &(1000 + u64::from(me)).to_le_bytes())?;
    let ticket = ep.fetch_add_u64(0, key, 0, 1)?;
    ep.barrier()?;
    let mut back = [0u8; 8];
    ep.get(right, key, slot, &mut back)?;
    assert_eq!(u64::from_le_bytes(back), 1000 + u64::from(me));
    println!("rank {me}/{n}: put+get to rank {right} ok, fetch_add ticket {ticket}");
    ep.barrier()?;
    if me == 0 {
        let total = region.load_u64(0)?;
        assert_eq!(total, u64::from(n), "every rank added exactly once");
        println!("rank 0: counter = {total} (one fetch_add per rank, exactly once)");
    }
    Ok(())
}
