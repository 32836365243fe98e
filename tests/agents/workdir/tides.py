"""Prints the next high and low tide for a harbour (fixed sample data)."""

TIDES = {"Brest": ("06:12", "12:25"), "Dover": ("04:51", "11:03")}


def main() -> None:
    for harbour, (high, low) in sorted(TIDES.items()):
        print(f"{harbour}: high {high}, low {low}")


if __name__ == "__main__":
    main()
