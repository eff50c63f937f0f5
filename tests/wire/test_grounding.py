"""Source grounding (gwlab/wire/grounding.py): statuses and spans that index the original text exactly."""

from __future__ import annotations

import datetime as dt

import pytest

from gwlab.errors import InvalidRequest
from gwlab.wire.grounding import (
    EXACT,
    EXEMPT,
    FUZZY,
    MISPLACED,
    NOT_FOUND,
    UNGROUNDED,
    Grounding,
    ground,
    ground_fields,
    kind_of,
)


def quoted(value, text, kind="string"):
    """The status and the text the span points at."""
    found = ground(value, text, kind)
    assert found is not None
    return found.status, None if found.span is None else text[found.span[0]:found.span[1]]


TICKET = ("Hi!  My order BRW 10421 (the Espresso   Machine) cost $29.90 on 15 Jan. Please refund it; "
          "call me at 555-0100.")


@pytest.mark.parametrize(("value", "expected"), [
    ("BRW-10421", "BRW 10421"), ("brw10421", "BRW 10421"), ("BRW 10421", "BRW 10421"),
    ("espresso machine", "Espresso   Machine"), ("ESPRESSO MACHINE!", "Espresso   Machine"),
    ("Please refund it", "Please refund it"),
])
def test_a_quoted_value_is_exact_whatever_its_case_spacing_punctuation_or_id_separators(value, expected):
    assert quoted(value, TICKET) == (EXACT, expected)


@pytest.mark.parametrize("value", ["BRW-12345", "12345", "refund for a grinder", "money back", "BRW-1042"])
def test_an_invented_or_paraphrased_value_is_not_found(value):
    assert quoted(value, TICKET) == (NOT_FOUND, None)


def test_a_digit_inside_a_longer_number_is_not_a_match():
    assert quoted("10421", "order 110421")[0] == NOT_FOUND
    assert quoted(10421, "order 110421", "number")[0] == NOT_FOUND


@pytest.mark.parametrize(("value", "text"), [
    ("BW10421", "Order BRW-10421 arrived broken."),  # a local model's answer, once taken for "10421" (issue 33)
    ("No. 10421", "Order BRW-10421 arrived broken."),
    ("10421", "Order BW10421 arrived broken."),
    ("X200", "The box for model X2000 was empty."),
])
def test_an_ids_digits_are_not_read_as_a_number(value, text):
    assert quoted(value, text) == (NOT_FOUND, None)
    if value.isdigit():
        assert quoted(int(value), text, "number") == (NOT_FOUND, None)


@pytest.mark.parametrize(("value", "text", "expected"), [
    ("USD29.90", "It cost $29.90", "29.90"), ("59 euros", "the price is €59 now", "59"),
    ("CHF 1'234", "Total CHF1'234", "CHF1'234"), ("1234", "Total CHF1'234", "1'234"),
    ("3000", "価格は3000円でした", "3000"),
])
def test_an_amount_keeps_its_currency_letters_and_cjk_numbers_need_no_space(value, text, expected):
    assert quoted(value, text) == (EXACT, expected)


def test_ids_never_match_approximately():
    assert quoted("BRW-10422", TICKET)[0] == NOT_FOUND


def test_extra_words_and_a_typo_are_fuzzy():
    text = "The espresso grinder machine is broken, and the delivery was late."
    assert quoted("espresso machine", text) == (FUZZY, "espresso grinder machine")
    assert quoted("the delivry was late", text) == (FUZZY, "the delivery was late")


def test_a_value_sharing_one_word_of_two_is_not_grounded():
    assert quoted("espresso cups", "The espresso machine is broken.")[0] == NOT_FOUND


@pytest.mark.parametrize(("value", "text", "expected"), [
    (29.9, "It cost $29.90 yesterday", "29.90"),
    (29.9, "Es kostete 29,90 € gestern", "29,90"),
    (1234.5, "Total: 1,234.50 USD", "1,234.50"),
    (1234.5, "Summe: 1.234,50 EUR", "1.234,50"),
    (1234, "Swiss price CHF 1'234", "1'234"),
    (3, "I ordered 3 bags", "3"),
    (10421, "order BRW-10421", "10421"),
])
def test_numbers_are_found_in_their_usual_writings(value, text, expected):
    assert quoted(value, text, "number") == (EXACT, expected)


@pytest.mark.parametrize(("value", "text", "expected"), [
    (1295, "Order den 22 maj 2026, 1 295 kr, saknar pedaler.", "1 295"),
    (12500, "Order CYC-51652, 10.07.2026, 12 500 Ft.", "12 500"),
    (1295.5, "Montant : 1\u202f295,50 €", "1\u202f295,50"),
    (3450, "Total 3\u00a0450 NOK", "3\u00a0450"),
])
def test_a_number_grouped_by_spaces_is_one_number(value, text, expected):
    assert quoted(value, text, "number") == (EXACT, expected)


@pytest.mark.parametrize(("value", "text"), [
    (500, "I paid 12 500 Ft."),  # a group of a spaced number is not a number of its own
    (12, "I paid 12 500 Ft."),
    (12500, "I bought 12 bags, 500 g each."),  # a comma between them: two numbers
])
def test_a_spaced_numbers_groups_and_neighbouring_numbers_are_not_joined_wrongly(value, text):
    assert quoted(value, text, "number")[0] == NOT_FOUND


@pytest.mark.parametrize(("value", "text"), [
    (2, "注文CYC-80415のライトが2026年2月9日に届きました"),  # Gemma's amount: the month of a date
    (11, "My appointment on 2026-03-11 was cancelled."),
    (12, "Bestellung vom 12.02.2026, Betrag 45,00 €"),
    (2026, "Delivered 15 January 2026, late"),
])
def test_a_day_month_or_year_of_a_date_is_not_a_number_of_its_own(value, text):
    assert quoted(value, text, "number")[0] == NOT_FOUND


@pytest.mark.parametrize(("value", "text"), [
    ("1", "You charged $1,150.00 for the road bike, the ad said $1,050.00."),  # Gemma's order id
    ("150", "You charged $1,150.00 for the road bike."),
    ("02", "Bestellung vom 12.02.2026"),
])
def test_a_string_value_is_not_grounded_on_a_piece_of_a_number(value, text):
    assert quoted(value, text)[0] == NOT_FOUND


def test_a_piece_of_a_number_leaves_the_same_value_written_elsewhere_grounded():
    assert quoted("1", "Paid $1,150.00 for 1 bike") == (EXACT, "1")
    assert quoted(15, "I paid 15 on 15 Jan 2026", "number") == (EXACT, "15")
    assert quoted("CYC-41890", "Bestellung CYC-41890 vom 12.02.2026, Betrag 1.249,00 €") == (EXACT, "CYC-41890")


def test_a_number_written_as_a_word_is_fuzzy():
    assert quoted(2, "I ordered two bags of beans", "number") == (FUZZY, "two")
    assert quoted(3, "Ich bestellte drei Tüten", "number") == (FUZZY, "drei")


def test_an_amount_in_a_string_field_is_read_as_a_number():
    assert quoted("$29.90", "It cost 29,9 euros")[0] == EXACT
    assert quoted("EUR 12,50", "The bill said 12.50")[0] == EXACT
    assert quoted("$45.00", "It cost $29.90")[0] == NOT_FOUND


def test_a_wrong_number_is_not_found():
    assert quoted(29.99, "It cost $29.90", "number")[0] == NOT_FOUND


@pytest.mark.parametrize(("text", "expected"), [
    ("Delivered on 2026-01-15 at noon", "2026-01-15"),
    ("Delivered on 15/01/2026.", "15/01/2026"),
    ("Delivered on 01/15/2026.", "01/15/2026"),
    ("Geliefert am 15.01.2026.", "15.01.2026"),
    ("Delivered on 15-01-26.", "15-01-26"),
    ("Delivered 15 January 2026", "15 January 2026"),
    ("Delivered January 15th, 2026, late", "January 15th, 2026"),
    ("Delivered Jan. 15, 2026", "Jan. 15, 2026"),
    ("Geliefert am 15. Januar 2026", "15. Januar 2026"),
    ("Livré le 15 janvier 2026", "15 janvier 2026"),
    ("Entregado el 15 de enero de 2026", "15 de enero de 2026"),
    ("2026年1月15日に届きました", "2026年1月15日"),
    ("Consegnato il 15 gennaio 2026", "15 gennaio 2026"),
    ("Pedido de 15 de janeiro de 2026", "15 de janeiro de 2026"),
    ("Geleverd op 15 januari 2026", "15 januari 2026"),
])
def test_dates_are_found_in_several_formats_and_languages(text, expected):
    assert quoted("2026-01-15", text, "date") == (EXACT, expected)


@pytest.mark.parametrize(("value", "text", "expected"), [
    ("2026-05-29", "Pedido CYC-51251 de 29 de maio de 2026, paguei R$ 259,90", "29 de maio de 2026"),
    ("2026-05-22", "Order CYC-51186 den 22 maj 2026, 1 295 kr", "22 maj 2026"),
    ("2026-05-14", "Bestelling van 14 mei 2026", "14 mei 2026"),
    ("2026-05-12", "L'ordine del 12 maggio 2026", "12 maggio 2026"),
])
def test_may_in_italian_portuguese_dutch_and_swedish(value, text, expected):
    assert quoted(value, text, "date") == (EXACT, expected)


def test_a_date_whose_year_the_text_omits_is_fuzzy():
    assert quoted("2026-01-15", "It came on 15 Jan, broken.", "date") == (FUZZY, "15 Jan")
    assert quoted(dt.date(2026, 1, 15), "It came on 1月15日", "date") == (FUZZY, "1月15日")


def test_a_different_date_or_year_is_not_found():
    assert quoted("2026-01-16", "Delivered 15 January 2026", "date")[0] == NOT_FOUND
    assert quoted("2025-01-15", "Delivered 15 January 2026", "date")[0] == NOT_FOUND
    assert quoted("2026-01-15", "Delivered yesterday", "date")[0] == NOT_FOUND


def test_a_datetime_is_grounded_by_its_date():
    assert quoted("2026-01-15T09:30:00", "Seen on 15 Jan 2026 at 9:30", "date")[0] == EXACT


@pytest.mark.parametrize(("value", "text", "status", "expected"), [
    ("Müller", "Herr MÜLLER rief an", EXACT, "MÜLLER"),
    ("Muller", "Herr Müller rief an", FUZZY, "Müller"),
    ("Mueller", "Herr Müller rief an", FUZZY, "Müller"),
    ("Hauptstraße 5", "Hauptstrasse 5, Berlin", EXACT, "Hauptstrasse 5"),
    ("Straße", "Musterstraße 7", NOT_FOUND, None),  # tokens are whole: a compound's part is not quoted
    ("Kaffeemaschine", "Die Kaffeemaschine ist kaputt", EXACT, "Kaffeemaschine"),
    ("café crème", "Un CAFÉ  Crème, s'il vous plaît", EXACT, "CAFÉ  Crème"),
    ("東京駅", "私は東京駅でコーヒーを買いました", EXACT, "東京駅"),
    ("コーヒー", "私は東京駅でコーヒーを買いました", EXACT, "コーヒー"),
    ("大阪", "私は東京駅でコーヒーを買いました", NOT_FOUND, None),
])
def test_multilingual_text(value, text, status, expected):
    assert quoted(value, text) == (status, expected)


def test_casefold_makes_sharp_s_and_ss_one_token():
    assert quoted("STRASSE", "in der Straße") == (EXACT, "Straße")


@pytest.mark.parametrize("text", [
    "Prefix 🎉 émojis first: order BRW-10421 then",
    "e\u0301 combining accents before: BRW-10421",
    "\r\n\ttabs and CRLF\r\nBRW-10421",
    "wide ｆｏｒｍｓ and BRW－10421",
])
def test_spans_index_the_original_text_exactly(text):
    found = ground("BRW-10421", text)
    assert found is not None and found.status == EXACT
    start, end = found.span
    assert text[start:end].replace("－", "-") == "BRW-10421"


def test_missing_values_have_no_grounding_and_exempt_kinds_are_exempt():
    assert ground(None, TICKET) is None
    assert ground(float("nan"), TICKET, "number") is None
    assert ground(True, TICKET) == Grounding(EXEMPT)
    assert ground("positive", TICKET, "exempt") == Grounding(EXEMPT)


def test_an_empty_text_grounds_nothing():
    assert ground("BRW-10421", "") == Grounding(NOT_FOUND)
    assert ground("BRW-10421", None) == Grounding(NOT_FOUND)


@pytest.mark.parametrize(("prop", "kind"), [
    ({"type": "string"}, "string"), ({"type": ["string", "null"]}, "string"),
    ({"type": "integer"}, "number"), ({"type": ["number", "null"]}, "number"),
    ({"type": "string", "format": "date"}, "date"),
    ({"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]}, "date"),
    ({"type": "boolean"}, "exempt"), ({"type": "string", "enum": ["a", "b"]}, "exempt"),
    ({"type": ["string", "null"], "enum": ["a", None]}, "exempt"),
    ({"type": "array", "items": {"type": "string"}}, "exempt"),
    ({"type": "string", "x-grounding": False}, "exempt"),
    ({"anyOf": [{"type": "string", "x-grounding": False}, {"type": "null"}]}, "exempt"),
])
def test_kind_of_a_schema_property(prop, kind):
    assert kind_of(prop) == kind


# --- kinds: a value written only as another kind of span is misplaced ------------------------------------

@pytest.mark.parametrize(("value", "text", "span"), [
    ("1", "I bought one bike and a bell.", "one"),  # a number word is no id (issue 33: Gemma's "1")
    ("18", "The pump cost 18 euros.", "18"), ("18", "The pump cost $18.", "18"), ("18", "Total: EUR 18", "18"),
    ("250", "I paid 250 AED for both.", "250"), ("6200", "代金は¥6,200でした。", "6,200"),
    ("85000", "수리비 85,000원을 냈는데", "85,000"), ("680", "付了680元", "680"),
    ("42", "Do you have size 42 cycling shoes?", "42"),  # a short bare number counts, it names nothing
    ("3", "The keyboard has 3 keys missing.", "3"), ("256", "the 256 GB drive is empty", "256"),
    ("4000", "a 4000 mAh battery", "4000"), ("12", "after 12 hours of charging", "12"),
    ("5", "es dauerte 5 Tage", "5"), ("10", "écran de 10 pouces, 10 jours", "10"),
    ("15", "Delivered on 15 May 2026.", "15"), ("2026", "2026年5月15日に届きました", "2026"),
    ("2026-07-24", "My order came on 24 July 2026.", "24 July 2026"),  # a date given as the id (SmolLM2)
    ("15.05.2026", "Bestellung vom 15.05.2026", "15.05.2026"),
    ("blue", "Order CYC-51803: the bag is blue, I ordered black.", "blue"),  # a word, no code
])
def test_an_id_written_only_as_a_number_word_an_amount_a_measurement_a_count_a_date_or_a_word_is_misplaced(
        value, text, span):
    assert quoted(value, text, "identifier") == (MISPLACED, span)


@pytest.mark.parametrize(("value", "text", "span"), [
    ("VF-70012", "repair VF 70012 is late", "VF 70012"), ("88123", "order 88123 never came", "88123"),
    ("18", "Order #18 is late; I paid 18 euros.", "18"), ("512", "Bestellung Nr. 512 fehlt", "512"),
    ("207", "commande n° 207 du 3 mai", "207"), ("QXBRTZ", "booking ref QXBRTZ, 2 nights", "QXBRTZ"),
    ("12345", "注文番号12345は届きません", "12345"), ("cyc51440", "Bestellung cyc51440 vom 3. Mai", "cyc51440"),
    ("RMA-2026-0415", "return RMA-2026-0415 of 3 June 2026", "RMA-2026-0415"),
])
def test_an_id_written_as_a_code_or_a_long_or_signed_number_is_grounded(value, text, span):
    assert quoted(value, text, "identifier") == (EXACT, span)


def test_a_string_field_without_a_kind_still_grounds_on_any_span():
    assert quoted("1", "I bought one bike.") == (FUZZY, "one")
    assert quoted("blue", "the bag is blue") == (EXACT, "blue")


@pytest.mark.parametrize(("value", "text", "span"), [
    ("student", "Do you offer student discounts on helmets?", "student"),
    ("blue", "Order CYC-51803: the bag is blue.", "blue"),
    ("child trailer with a torn cover", "Order CYC-51716: 249,00 € for a child trailer with a torn cover.",
     "child trailer with a torn cover"),
    ("Child trailer with a torn cover", "Child trailer with a torn cover: 249,00 €.",
     "Child trailer with a torn cover"),  # capitalised at a sentence's start, yet a run of lowercase words
    ("CYC-51607", "Hello, order CYC-51607, paid $19.00.", "CYC-51607"),  # digits are no name
    ("bike", "I have two bikes to repair.", "bikes"),
    ("синяя", "Сумка синяя, а я заказал чёрную.", "синяя"),  # Cyrillic is cased too
    ("roue", "Bonjour, la roue est voilée.", "roue"),
])
def test_a_persons_name_written_only_as_lowercase_words_or_with_digits_is_misplaced(value, text, span):
    assert quoted(value, text, "person_name") == (MISPLACED, span)


@pytest.mark.parametrize(("value", "text"), [
    ("Sanne de Vries", "Goedemiddag, met Sanne de Vries."), ("Grace O'Neill", "Hi, Grace O'Neill here."),
    ("Jürgen Weiß", "Mit freundlichen Grüßen, Jürgen Weiß"), ("Mohammed Al-Rashid", "I am Mohammed Al-Rashid."),
    ("Ludwig van Beethoven", "Signed: Ludwig van Beethoven"), ("Анна Иванова", "Меня зовут Анна Иванова."),
    ("Νίκος Παπαδόπουλος", "Γεια σας, είμαι ο Νίκος Παπαδόπουλος."),
    ("佐藤花子", "こんにちは、佐藤花子です。"), ("김민수", "안녕하세요, 김민수입니다."), ("王芳", "你好，我是王芳。"),
    ("jordan", "hi, its jordan here, my phone is broken"),  # a text without capitals says nothing by case
    ("Student", "Student here: do you give discounts?"),  # a capitalised word passes: the rule reads case only
])
def test_a_persons_name_in_capitals_or_an_uncased_script_or_an_all_lowercase_text_is_grounded(value, text):
    assert quoted(value, text, "person_name") == (EXACT, value)


@pytest.mark.parametrize(("value", "text", "span"), [
    (80, "It won't charge past 80%.", "80"), (256, "the 256 GB drive is empty", "256"),
    (3, "It broke again in 3 days.", "3"), (15.6, "the 15.6-inch screen flickers", "15.6"),
    (2, "I dropped off two phones.", "two"),  # a number word counts things unless money stands beside it
    (5, "Der Akku hält nur 5 Stunden.", "5"),
])
def test_an_amount_written_only_as_a_measurement_or_a_count_is_misplaced(value, text, span):
    assert quoted(value, text, "amount") == (MISPLACED, span)


@pytest.mark.parametrize(("value", "text", "status", "span"), [
    (18, "The pump cost 18 euros.", EXACT, "18"), (250, "I paid 250 AED for both.", EXACT, "250"),
    (680, "付了680元", EXACT, "680"), (85000, "수리비 85,000원을", EXACT, "85,000"),
    (1495, "kostade 1 495 kr", EXACT, "1 495"), (15800, "Total 15,800 JPY", EXACT, "15,800"),
    (10, "I paid ten euros.", FUZZY, "ten"), (64, "a 64 GB card for 64 dollars", EXACT, "64"),
    (4, "a 4 GB card for $4", EXACT, "4"),
])
def test_an_amount_of_money_is_grounded_even_beside_a_measurement(value, text, status, span):
    found = ground(value, text, "amount")
    assert found is not None and found.status == status and text[found.span[0]:found.span[1]] == span
    if "GB" in text:
        assert found.span[0] > text.index("GB")  # the money, not the card's size


def test_a_plain_number_may_be_a_measurement():
    assert quoted(3, "It broke again in 3 days.", "number") == (EXACT, "3")
    assert quoted(80, "It won't charge past 80%.", "number") == (EXACT, "80")


def test_a_misplaced_value_is_ungrounded_and_keeps_where_the_text_writes_it():
    found = ground("18", "The pump cost 18 euros.", "identifier")
    assert found == Grounding(MISPLACED, (14, 16)) and not found.grounded
    assert MISPLACED in UNGROUNDED and NOT_FOUND in UNGROUNDED


@pytest.mark.parametrize(("prop", "field", "kind"), [
    ({"type": "string"}, "order_id", "identifier"), ({"type": ["string", "null"]}, "orderId", "identifier"),
    ({"type": "string"}, "booking_reference", "identifier"), ({"type": "string"}, "zip_code", "identifier"),
    ({"type": "string", "pattern": "^[A-Z]{3}-[0-9]+$"}, "ticket", "identifier"),
    ({"type": "integer"}, "order_id", "identifier"), ({"type": "integer"}, "number_of_items", "number"),
    ({"type": "number"}, "amount", "amount"), ({"type": ["number", "null"]}, "totalPrice", "amount"),
    ({"type": "number"}, "weight_kg", "number"),
    ({"type": "string"}, "name", "person_name"), ({"type": "string"}, "customer_name", "person_name"),
    ({"type": "string"}, "lastName", "person_name"), ({"type": "string"}, "surname", "person_name"),
    ({"type": "string"}, "product_name", "string"), ({"type": "string"}, "company_name", "string"),
    ({"type": "string"}, "delivery_date", "date"), ({"type": "string"}, "summary", "string"),
    ({"type": "string", "x-grounding": "string"}, "order_id", "string"),  # the flag overrides the name
    ({"anyOf": [{"type": "string", "x-grounding": "person_name"}, {"type": "null"}]}, "author", "person_name"),
    ({"type": "string", "x-grounding": True}, "name", "person_name"),  # true: inferred as without the flag
    ({"type": "integer", "x-grounding": False}, "order_id", "exempt"),
])
def test_a_fields_kind_comes_from_its_type_format_pattern_and_name_or_its_flag(prop, field, kind):
    assert kind_of(prop, field) == kind


def test_an_unknown_kind_in_the_flag_is_refused_naming_the_field():
    with pytest.raises(InvalidRequest) as caught:
        kind_of({"type": "string", "x-grounding": "colour"}, "shade")
    assert "shade" in str(caught.value) and "identifier" in str(caught.value)


def test_ground_fields_uses_each_fields_kind_from_its_name():
    text = "Hi, Ana Costa here. I paid 18 euros for one lamp."
    props = {"order_id": {"type": ["string", "null"]}, "name": {"type": ["string", "null"]},
             "amount": {"type": ["number", "null"]}}
    found = ground_fields({"order_id": "18", "name": "lamp", "amount": 18}, text, props)
    assert {f: g.status for f, g in found.items() if g} == {"order_id": MISPLACED, "name": MISPLACED,
                                                             "amount": EXACT}
